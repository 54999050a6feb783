package main

// The cost benchmark (issue 36, item 7): Volcano's whole cycle (the shipped conf's actions, its
// conf loader, OpenSession to CloseSession) on BenchCluster, timed inside the Go process that
// runs the cycle (a fresh one per cycle: RunBenchCycle), with
//   a  no extender (the plugin removed from the conf),
//   b  a constant extender (every verb answered with its neutral value: the floor),
//   c  policy-extender serve (2 workers x 8 threads, as StartService starts it) on
//      bench/rules.policy,
//   d  the same rules hand-written in Go (handwritten.go),
// in interleaved rounds (a, b, c, d, a, b, ...) so the machine's noise falls on each alike.
// b and d run in processes of their own (this binary, -serve-extender), as c does.
//
// Volcano's extender client uses http.DefaultTransport (http.Client{Timeout: ...} without a
// Transport), so a wrapper around it counts and times every call per verb without a proxy's
// extra hop: the time from sending the request to the answer's headers, the request bytes.

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"volcano.sh/volcano/pkg/scheduler/framework"
	"volcano.sh/volcano/pkg/scheduler/plugins/extender"

	"policy-extender/e2e/volcano/internal/harness"
)

// benchTimeout replaces the shipped conf's extender.httpTimeout (1s): at these sizes the
// snapshot takes longer than 1 s to send and store (docs/operations.md, "Choosing
// extender.httpTimeout"), and a timed-out open would measure a cycle without a session.
const benchTimeout = "60s"

type benchVariant struct {
	key, label string
	url        string // "" for no extender
}

type verbStat struct {
	Calls int
	Time  time.Duration // summed over calls (predicate calls run 16 at a time)
	Bytes int64
}

// timingTransport counts and times Volcano's calls per verb.
type timingTransport struct {
	base  http.RoundTripper
	mu    sync.Mutex
	stats map[string]*verbStat
}

func (t *timingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	start := time.Now()
	resp, err := t.base.RoundTrip(r)
	elapsed := time.Since(start)
	t.mu.Lock()
	s := t.stats[path.Base(r.URL.Path)]
	if s == nil {
		s = &verbStat{}
		t.stats[path.Base(r.URL.Path)] = s
	}
	s.Calls++
	s.Time += elapsed
	s.Bytes += r.ContentLength
	t.mu.Unlock()
	return resp, err
}

func (t *timingTransport) take() map[string]*verbStat {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := t.stats
	t.stats = map[string]*verbStat{}
	return out
}

// goExtender is a Go extender served by this binary in a process of its own.
type goExtender struct {
	URL string
	cmd *exec.Cmd
}

func startGoExtender(kind string) (*goExtender, error) {
	port, err := harness.FreePort()
	if err != nil {
		return nil, err
	}
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self, "-serve-extender", kind, "-bind", fmt.Sprintf("127.0.0.1:%d", port))
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	e := &goExtender{URL: fmt.Sprintf("http://127.0.0.1:%d", port), cmd: cmd}
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if resp, err := http.Get(e.URL + "/readyz"); err == nil {
			resp.Body.Close()
			return e, nil
		}
	}
	e.Stop()
	return nil, fmt.Errorf("the %s extender did not start", kind)
}

func (e *goExtender) Stop() {
	_ = e.cmd.Process.Signal(syscall.SIGTERM)
	_ = e.cmd.Wait()
}

// serviceSeconds reads the service's own time per verb (its request-duration histogram's sums).
func serviceSeconds(url string) map[string]float64 {
	out := map[string]float64{}
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		return out
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	re := regexp.MustCompile(`(?m)^policy_extender_request_duration_seconds_sum\{verb="([^"]+)"\} (\S+)$`)
	for _, m := range re.FindAllStringSubmatch(string(body), -1) {
		v, _ := strconv.ParseFloat(m[2], 64)
		out[m[1]] += v
	}
	return out
}

type benchSize struct{ nodes, pods int }

func parseSizes(text string) ([]benchSize, error) {
	var out []benchSize
	for _, part := range strings.Split(text, ",") {
		var s benchSize
		if _, err := fmt.Sscanf(strings.TrimSpace(part), "%dx%d", &s.nodes, &s.pods); err != nil || s.nodes <= 0 || s.pods <= 0 {
			return nil, fmt.Errorf("-bench: %q is not NODESxPODS", part)
		}
		out = append(out, s)
	}
	return out, nil
}

func loadavg() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	return strings.Join(strings.Fields(string(data))[:3], " ")
}

// cycleResult is what one benchmark cycle process reports (as JSON on its standard output).
type cycleResult struct {
	Elapsed time.Duration
	Binds   map[string]string
	Calls   map[string]*verbStat
	// the marshal measurement (-bench-cycle marshal)
	MarshalTime  time.Duration
	MarshalBytes int
}

// RunBenchCycle is one cycle of one variant in a process of its own (-bench-cycle): the mock
// scheduler cache's workers (node, resync and cleanup queues) wait on queues nobody shuts down
// and keep every cache alive, a gigabyte per cycle at 1,000 nodes; a process per cycle frees it,
// and each cycle starts on a fresh heap, without the garbage of the one before.
// url "" is variant a; "marshal" times Volcano's json.Marshal of the snapshot instead.
func RunBenchCycle(w io.Writer, repo, size, url string) error {
	list, err := parseSizes(size)
	if err != nil || len(list) != 1 {
		return fmt.Errorf("-bench-size: one NODESxPODS")
	}
	objs := BenchCluster(list[0].nodes, list[0].pods)
	confFile := filepath.Join(repo, "docker/k8s/sidecar/volcano-scheduler.conf")
	if benchConf != "" { // -bench-conf: the derived-conf benchmark (benchderived.go)
		confFile = benchConf
	}
	result := &cycleResult{}
	if url == "marshal" {
		result.MarshalTime, result.MarshalBytes, err = measureMarshal(objs, confFile)
		if err != nil {
			return err
		}
		return json.NewEncoder(w).Encode(result)
	}
	var overrides map[string]any
	if url != "" {
		overrides = map[string]any{"extender.httpTimeout": benchTimeout}
	}
	actions, tiers, configurations, err := LoadConf(confFile, "", url, overrides)
	if err != nil {
		return err
	}
	transport := &timingTransport{base: http.DefaultTransport, stats: map[string]*verbStat{}}
	http.DefaultTransport = transport // Volcano's extender client uses it
	runtime.GC()
	out, err := RunCycle(objs, actions, tiers, configurations, nil)
	if err != nil {
		return err
	}
	result.Elapsed, result.Binds, result.Calls = out.Elapsed, out.Binds, transport.take()
	return json.NewEncoder(w).Encode(result)
}

// runCycleProcess runs RunBenchCycle in a new process of this binary.
func runCycleProcess(repo string, size benchSize, url string) (*cycleResult, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	if url == "" {
		url = "none"
	}
	cmd := exec.Command(self, "-repo", repo, "-bench-cycle", url, "-bench-size", fmt.Sprintf("%dx%d", size.nodes, size.pods))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("benchmark cycle %q: %w", url, err)
	}
	result := &cycleResult{}
	if err := json.Unmarshal(out, result); err != nil {
		return nil, fmt.Errorf("benchmark cycle %q: %w: %s", url, err, out)
	}
	return result, nil
}

// RunBench runs the benchmark: `rounds` timed cycles per variant and size after one warm-up each.
func RunBench(w io.Writer, release, repo string, command []string, work, sizes string, rounds int) error {
	list, err := parseSizes(sizes)
	if err != nil {
		return err
	}
	rules, err := os.ReadFile(filepath.Join(repo, "e2e", "volcano", "bench", "rules.policy"))
	if err != nil {
		return err
	}
	// As deployed: the tally flushed at its default interval (StartService's 0.05 s is for the
	// scenarios' /why checks right after a cycle; the later option wins).
	svc, err := harness.StartService(command, filepath.Join(work, "bench"), map[string]string{"rules.policy": string(rules)},
		[]string{"--volcano-timeout", strings.TrimSuffix(benchTimeout, "s"), "--tally-flush-seconds", "1"})
	if err != nil {
		return err
	}
	defer svc.Stop()
	constant, err := startGoExtender("constant")
	if err != nil {
		return err
	}
	defer constant.Stop()
	handwritten, err := startGoExtender("handwritten")
	if err != nil {
		return err
	}
	defer handwritten.Stop()
	// Interrupted: stop the servers (the deferred calls do not run on a signal).
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		<-signals
		svc.Stop()
		constant.Stop()
		handwritten.Stop()
		os.Exit(130)
	}()

	variants := []benchVariant{
		{"a", "no extender", ""},
		{"b", "constant (floor)", constant.URL},
		{"c", "policy-extender", svc.URL},
		{"d", "hand-written Go", handwritten.URL},
	}

	fmt.Fprintf(w, "Volcano %s: the shipped conf's actions, %d timed rounds per variant after a warm-up, interleaved; "+
		"each cycle in a process of its own\n", release, rounds)
	fmt.Fprintf(w, "load average at start: %s\n", loadavg())
	for _, size := range list {
		objs := BenchCluster(size.nodes, size.pods)
		fmt.Fprintf(w, "\n== %d nodes x %d running pods (%d pods, %d running jobs), 10 pending jobs x 4 tasks\n",
			size.nodes, size.pods, len(objs.Pods), len(objs.PodGroups)-10)
		objs = nil
		elapsed := map[string][]time.Duration{}
		stats := map[string]map[string]*verbStat{}
		binds := map[string][]map[string]string{}
		svcTime := map[string]float64{}
		for round := 0; round <= rounds; round++ {
			for _, v := range variants {
				var before map[string]float64
				if v.key == "c" {
					before = serviceSeconds(svc.URL)
				}
				out, err := runCycleProcess(repo, size, v.url)
				if err != nil {
					return err
				}
				if round == 0 { // the warm-up
					continue
				}
				elapsed[v.key] = append(elapsed[v.key], out.Elapsed)
				binds[v.key] = append(binds[v.key], out.Binds)
				if stats[v.key] == nil {
					stats[v.key] = map[string]*verbStat{}
				}
				for verb, s := range out.Calls {
					sum := stats[v.key][verb]
					if sum == nil {
						sum = &verbStat{}
						stats[v.key][verb] = sum
					}
					sum.Calls += s.Calls
					sum.Time += s.Time
					sum.Bytes += s.Bytes
				}
				if v.key == "c" {
					for verb, seconds := range serviceSeconds(svc.URL) {
						svcTime[verb] += seconds - before[verb]
					}
				}
			}
		}
		fmt.Fprintf(w, "load average after: %s\n", loadavg())
		reportBench(w, variants, elapsed, stats, binds, svcTime, rounds)
		marshal, err := runCycleProcess(repo, size, "marshal")
		if err != nil {
			return err
		}
		reportMarshal(w, marshal, stats["c"], rounds)
	}
	return nil
}

func median(values []time.Duration) time.Duration {
	sorted := append([]time.Duration{}, values...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i] < sorted[j] })
	n := len(sorted)
	if n%2 == 1 {
		return sorted[n/2]
	}
	return (sorted[n/2-1] + sorted[n/2]) / 2
}

func seconds(d time.Duration) string { return fmt.Sprintf("%.3f s", d.Seconds()) }

func sameBinds(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func reportBench(w io.Writer, variants []benchVariant, elapsed map[string][]time.Duration,
	stats map[string]map[string]*verbStat, binds map[string][]map[string]string, svcTime map[string]float64, rounds int) {
	med := map[string]time.Duration{}
	fmt.Fprintf(w, "%-30s %10s   %s\n", "variant", "median", "every round (OpenSession to CloseSession)")
	for _, v := range variants {
		med[v.key] = median(elapsed[v.key])
		var all []string
		for _, d := range elapsed[v.key] {
			all = append(all, fmt.Sprintf("%.3f", d.Seconds()))
		}
		fmt.Fprintf(w, "(%s) %-26s %10s   %s; binds %d\n", v.key, v.label, seconds(med[v.key]), strings.Join(all, " "),
			len(binds[v.key][0]))
	}
	ratio := func(x, y string) string { return fmt.Sprintf("%.2f", med[x].Seconds()/med[y].Seconds()) }
	// Per round, to keep each ratio inside one round's machine noise.
	roundRatios := func(x, y string) string {
		var r []float64
		for i := range elapsed[x] {
			r = append(r, elapsed[x][i].Seconds()/elapsed[y][i].Seconds())
		}
		sort.Float64s(r)
		return fmt.Sprintf("per-round median %.2f, range %.2f-%.2f", r[len(r)/2], r[0], r[len(r)-1])
	}
	fmt.Fprintf(w, "(c)/(b) = %s (target <= 1.15; %s)\n", ratio("c", "b"), roundRatios("c", "b"))
	fmt.Fprintf(w, "(c)/(d) = %s (target <= 1.00; %s)\n", ratio("c", "d"), roundRatios("c", "d"))
	fmt.Fprintf(w, "(b)-(a) = %s: the extender plugin's floor; (c)-(b) = %s; (d)-(b) = %s\n",
		seconds(med["b"]-med["a"]), seconds(med["c"]-med["b"]), seconds(med["d"]-med["b"]))

	same, stable := true, true
	for i := range binds["c"] {
		same = same && sameBinds(binds["c"][i], binds["d"][i])
		stable = stable && sameBinds(binds["c"][i], binds["c"][0])
	}
	fmt.Fprintf(w, "binds of (c) and (d): %s in all %d rounds (%d binds each; (c) the same in every round: %v)\n",
		map[bool]string{true: "IDENTICAL", false: "DIFFERENT"}[same], rounds, len(binds["c"][0]), stable)
	if !same {
		fmt.Fprintf(w, "  (c) %v\n  (d) %v\n", binds["c"][0], binds["d"][0])
	}

	fmt.Fprintf(w, "per verb, per cycle (calls; request MB; time to the answer's headers summed over calls, mean per call):\n")
	verbs := map[string]bool{}
	for _, v := range variants {
		for verb := range stats[v.key] {
			verbs[verb] = true
		}
	}
	var names []string
	for verb := range verbs {
		names = append(names, verb)
	}
	sort.Strings(names)
	n := float64(rounds)
	for _, verb := range names {
		line := fmt.Sprintf("  %-15s", verb)
		for _, v := range variants[1:] {
			s := stats[v.key][verb]
			if s == nil {
				line += fmt.Sprintf(" | (%s) -", v.key)
				continue
			}
			line += fmt.Sprintf(" | (%s) %4.0f %7.1f MB %7.3f s %6.2f ms", v.key, float64(s.Calls)/n,
				float64(s.Bytes)/n/1e6, s.Time.Seconds()/n, s.Time.Seconds()*1000/float64(s.Calls))
		}
		if t, ok := svcTime[verb]; ok {
			line += fmt.Sprintf(" | service's own %.3f s", t/n)
		}
		fmt.Fprintln(w, line)
	}
}

// measureMarshal times what Volcano's extender plugin does before sending onSessionOpen:
// json.Marshal of the snapshot (median of 3), on a session of the same cluster.
func measureMarshal(objs *Objects, confFile string) (time.Duration, int, error) {
	_, tiers, configurations, err := LoadConf(confFile, "", "", nil)
	if err != nil {
		return 0, 0, err
	}
	sc, _, _, _, stop := newFilledCache(objs)
	defer close(stop)
	ssn := framework.OpenSession(sc, tiers, configurations)
	defer framework.CloseSession(ssn)
	request := &extender.OnSessionOpenRequest{Jobs: ssn.Jobs, Nodes: ssn.Nodes, Queues: ssn.Queues,
		NamespaceInfo: ssn.NamespaceInfo, RevocableNodes: ssn.RevocableNodes}
	var times []time.Duration
	var size int
	for i := 0; i < 3; i++ {
		runtime.GC()
		start := time.Now()
		body, err := json.Marshal(request)
		if err != nil {
			return 0, 0, err
		}
		times = append(times, time.Since(start))
		size = len(body)
	}
	return median(times), size, nil
}

// reportMarshal prints the snapshot's marshal time and, at its rate, that of the other verbs'
// bodies of variant c.
func reportMarshal(w io.Writer, m *cycleResult, perVerb map[string]*verbStat, rounds int) {
	rate := float64(m.MarshalBytes) / m.MarshalTime.Seconds()
	fmt.Fprintf(w, "Volcano's json.Marshal of the snapshot: %.1f MB in %s (%.0f MB/s)", float64(m.MarshalBytes)/1e6,
		seconds(m.MarshalTime), rate/1e6)
	var other int64
	for verb, s := range perVerb {
		if verb != "onSessionOpen" {
			other += s.Bytes
		}
	}
	fmt.Fprintf(w, "; the other verbs' %.1f MB per cycle at that rate: %s\n",
		float64(other)/float64(rounds)/1e6, seconds(time.Duration(float64(other)/float64(rounds)/rate*1e9)))
}
