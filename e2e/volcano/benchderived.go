package main

// The derived-conf benchmark (issue 47, item 2): a real Volcano cycle (as -bench: the shipped
// conf's actions, OpenSession to CloseSession timed in a fresh process per cycle, BenchCluster)
// against policy-extender serving a set
//   no-filter  bench/rules.policy without its filter (scores and the victim rule), and
//   no-score   bench/rules.policy without its scores (the filter and the victim rule),
// each with
//   full     the shipped conf (docker/k8s/sidecar/volcano-scheduler.conf: every verb but jobReady),
//   derived  the conf `policy-extender volcano-conf --replace --policies DIR` prints for that set
//            (only the verbs its rules serve, and the session verbs),
// in interleaved rounds (full, derived, full, ...). The derived conf is made by the CLI itself, so
// the benchmark measures the conf a user would ship. Binds must be the same: the verbs left out
// decide nothing.

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"

	"policy-extender/e2e/volcano/internal/harness"
)

// benchConf, when set (-bench-conf), is the scheduler conf a -bench-cycle process loads instead of
// the shipped one.
var benchConf string

// derivedSets are the two rule sets, cut from bench/rules.policy by the rule kinds they drop.
var derivedSets = []struct{ name, drop string }{
	{"no-filter", "filter"},
	{"no-score", "score"},
}

// withoutKind is rules.policy without its rules of one kind (each rule runs until a blank line).
func withoutKind(rules, kind string) string {
	var kept []string
	for _, block := range strings.Split(rules, "\n\n") {
		if regexp.MustCompile(`(?m)^` + kind + ` `).MatchString(block) {
			continue
		}
		kept = append(kept, block)
	}
	return strings.Join(kept, "\n\n")
}

// RunDerivedBench runs the derived-conf benchmark at each size.
func RunDerivedBench(w io.Writer, release, repo string, command []string, work, sizes string, rounds int) error {
	list, err := parseSizes(sizes)
	if err != nil {
		return err
	}
	rules, err := os.ReadFile(filepath.Join(repo, "e2e", "volcano", "bench", "rules.policy"))
	if err != nil {
		return err
	}
	shipped := filepath.Join(repo, "docker/k8s/sidecar/volcano-scheduler.conf")
	fmt.Fprintf(w, "Volcano %s: the full (shipped) conf against the derived one (volcano-conf --policies), %d timed "+
		"rounds per variant after a warm-up, interleaved; each cycle in a process of its own\n", release, rounds)
	fmt.Fprintf(w, "load average at start: %s\n", loadavg())
	for _, set := range derivedSets {
		dir := filepath.Join(work, "derived-"+set.name)
		svc, err := harness.StartService(command, dir, map[string]string{"rules.policy": withoutKind(string(rules), set.drop)},
			[]string{"--volcano-timeout", strings.TrimSuffix(benchTimeout, "s"), "--tally-flush-seconds", "1"})
		if err != nil {
			return err
		}
		stopOnSignal := make(chan os.Signal, 1) // interrupted: stop the service (deferred calls do not run)
		signal.Notify(stopOnSignal, syscall.SIGINT, syscall.SIGTERM)
		done := make(chan struct{})
		go func() {
			select {
			case <-stopOnSignal:
				svc.Stop()
				os.Exit(130)
			case <-done:
			}
		}()
		derived := filepath.Join(dir, "derived.conf")
		args := append(append([]string{}, command[1:]...), "volcano-conf", shipped, "--replace", "--policies",
			filepath.Join(dir, "policies"))
		out, err := exec.Command(command[0], args...).Output()
		if err == nil {
			err = os.WriteFile(derived, out, 0o644)
		}
		if err != nil {
			svc.Stop()
			return fmt.Errorf("volcano-conf --policies for %s: %w", set.name, err)
		}
		fmt.Fprintf(w, "\n== set %s (rules.policy without its %s rules); derived conf's verbs: %s\n", set.name, set.drop,
			verbsOf(string(out)))
		for _, size := range list {
			if err := derivedRounds(w, repo, svc.URL, shipped, derived, size, rounds); err != nil {
				svc.Stop()
				return err
			}
		}
		close(done)
		signal.Stop(stopOnSignal)
		svc.Stop()
	}
	fmt.Fprintf(w, "\nload average after: %s\n", loadavg())
	return nil
}

func verbsOf(conf string) string {
	var found []string
	for _, m := range regexp.MustCompile(`extender\.(\w+)Verb:`).FindAllStringSubmatch(conf, -1) {
		found = append(found, m[1])
	}
	return strings.Join(found, ", ")
}

func derivedRounds(w io.Writer, repo, url, full, derived string, size benchSize, rounds int) error {
	variants := []struct{ key, conf string }{{"full", full}, {"derived", derived}}
	elapsed := map[string][]time.Duration{}
	calls := map[string]map[string]int{}
	binds := map[string][]map[string]string{}
	for round := 0; round <= rounds; round++ {
		for _, v := range variants {
			out, err := runConfCycle(repo, size, url, v.conf)
			if err != nil {
				return err
			}
			if round == 0 {
				continue
			}
			elapsed[v.key] = append(elapsed[v.key], out.Elapsed)
			binds[v.key] = append(binds[v.key], out.Binds)
			if calls[v.key] == nil {
				calls[v.key] = map[string]int{}
			}
			for verb, s := range out.Calls {
				calls[v.key][verb] += s.Calls
			}
		}
	}
	fmt.Fprintf(w, "%d nodes x %d running pods, 10 pending jobs x 4 tasks:\n", size.nodes, size.pods)
	for _, v := range variants {
		var all []string
		for _, d := range elapsed[v.key] {
			all = append(all, fmt.Sprintf("%.3f", d.Seconds()))
		}
		fmt.Fprintf(w, "  %-8s median %s   every round %s   calls per cycle: %s\n", v.key, seconds(median(elapsed[v.key])),
			strings.Join(all, " "), perCycle(calls[v.key], rounds))
	}
	var ratios []string
	for i := range elapsed["full"] {
		ratios = append(ratios, fmt.Sprintf("%.2f", elapsed["derived"][i].Seconds()/elapsed["full"][i].Seconds()))
	}
	same := true
	for i := range binds["full"] {
		same = same && sameBinds(binds["full"][i], binds["derived"][i])
	}
	fmt.Fprintf(w, "  derived/full = %.2f on the medians; per round %s; binds %s (%d each)\n",
		median(elapsed["derived"]).Seconds()/median(elapsed["full"]).Seconds(), strings.Join(ratios, " "),
		map[bool]string{true: "IDENTICAL", false: "DIFFERENT"}[same], len(binds["full"][0]))
	return nil
}

func perCycle(calls map[string]int, rounds int) string {
	var parts []string
	for _, verb := range sortedKeys(calls) {
		parts = append(parts, fmt.Sprintf("%s %d", verb, calls[verb]/rounds))
	}
	return strings.Join(parts, ", ")
}

// runConfCycle runs RunBenchCycle in a new process of this binary with the scheduler conf `conf`.
func runConfCycle(repo string, size benchSize, url, conf string) (*cycleResult, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self, "-repo", repo, "-bench-cycle", url, "-bench-conf", conf,
		"-bench-size", fmt.Sprintf("%dx%d", size.nodes, size.pods))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("benchmark cycle %q with %s: %w", url, conf, err)
	}
	result := &cycleResult{}
	if err := json.Unmarshal(out, result); err != nil {
		return nil, fmt.Errorf("benchmark cycle %q: %w: %s", url, err, out)
	}
	return result, nil
}
