// Command e2e-volcano runs Volcano's own scheduler code against a real policy-extender: every
// scenario of scenarios/ is one whole scheduling cycle (Volcano's conf loader, OpenSession with
// the extender plugin, the real actions and plugins, CloseSession) against `policy-extender
// serve` on loopback. Built once per Volcano release by scripts/e2e-volcano.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"policy-extender/e2e/volcano/internal/harness"
)

func main() {
	var f harness.Flags
	f.Define("e2e-volcano", "Volcano", "e2e/volcano/scenarios",
		"the policy-extender repository (its shipped scheduler conf)", "print every scenario and Volcano's calls per verb")
	bench := flag.String("bench", "", "run the cost benchmark instead: SIZES as NODESxPODS[,NODESxPODS]")
	rounds := flag.Int("rounds", 5, "benchmark: cycles timed per variant and size")
	one := flag.String("one", "", "run only this scenario, in this process (the parent runs each scenario so)")
	serveExtender := flag.String("serve-extender", "", "benchmark (internal): serve the Go extender constant or handwritten on -bind")
	bind := flag.String("bind", "127.0.0.1:0", "benchmark (internal): the address of -serve-extender")
	benchCycle := flag.String("bench-cycle", "", "benchmark (internal): run one cycle against this extender URL (none: without), or marshal")
	benchSize := flag.String("bench-size", "", "benchmark (internal): NODESxPODS of -bench-cycle")
	flag.Parse()
	if *serveExtender != "" {
		if err := ServeExtender(*serveExtender, *bind); err != nil {
			fatal(err)
		}
		return
	}

	// Volcano's own logging and its fake evictor's prints would bury the report.
	report := os.Stdout
	if devnull, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0); err == nil {
		os.Stdout = devnull
	}
	// E2E_VOLCANO_KLOG=N: Volcano's log at level N on standard error (4 shows the actions' reasoning).
	harness.QuietKlog("E2E_VOLCANO_KLOG")

	if *benchCycle != "" {
		url := *benchCycle
		if url == "none" {
			url = ""
		}
		if err := RunBenchCycle(report, f.Repo, *benchSize, url); err != nil {
			fatal(err)
		}
		return
	}
	cleanup, err := f.SetDefaults()
	if err != nil {
		fatal(err)
	}
	defer cleanup()
	command := f.Command()
	if *bench != "" {
		if err := RunBench(report, f.Release, f.Repo, command, f.Work, *bench, *rounds); err != nil {
			fatal(err)
		}
		return
	}
	all, err := LoadScenarios(f.Scenarios)
	if err != nil {
		fatal(err)
	}
	filter := f.Filter()
	if *one != "" {
		for _, s := range all {
			if s.Name == *one {
				result := RunScenario(s, f.Release, f.Repo, command, filepath.Join(f.Work, s.Name))
				fmt.Fprint(report, result.Format())
				if !result.OK() {
					os.Exit(1)
				}
				return
			}
		}
		fatal(fmt.Errorf("no scenario %q", *one))
	}
	total, passed, skipped := 0, 0, 0
	verbs := map[string]int{}
	for _, s := range all {
		if filter != nil && !filter.MatchString(s.Name) {
			continue
		}
		if !s.AppliesTo(f.Release) {
			skipped++
			continue
		}
		total++
		ok, text := runIsolated(s.Name)
		if ok {
			passed++
		}
		addCalls(verbs, text)
		if f.Verbose || !ok {
			fmt.Fprint(report, text)
		}
	}
	line := fmt.Sprintf("volcano %s: %d scenarios, %d passed", f.Release, total, passed)
	if skipped > 0 {
		line += fmt.Sprintf(" (%d not for this release)", skipped)
	}
	fmt.Fprintln(report, line)
	fmt.Fprintf(report, "volcano %s: verbs called: %s\n", f.Release, harness.FormatCounts(verbs))
	if passed != total {
		os.Exit(1)
	}
}

// runIsolated runs one scenario in a child process of this binary: Volcano keeps state in
// package variables (its registered actions keep their parsed arguments, conf.EnabledActionMap,
// metrics), which would leak from one scenario into the next as it leaks from one conf into the
// next in a scheduler that reloads its conf.
func runIsolated(name string) (bool, string) {
	args := []string{"-one", name}
	flag.Visit(func(f *flag.Flag) {
		if f.Name != "run" && f.Name != "verbose" {
			args = append(args, "-"+f.Name+"="+f.Value.String())
		}
	})
	var stderr strings.Builder
	child := exec.Command(os.Args[0], args...)
	child.Stderr = &stderr
	out, err := child.Output()
	text := string(out)
	if err != nil && text == "" {
		// what the child said before it stopped (a fatal error, Volcano's panic): its last lines
		lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
		text = fmt.Sprintf("FAIL  %s\n      error: %v\n      | %s\n", name, err,
			strings.Join(lines[max(0, len(lines)-8):], "\n      | "))
	}
	return err == nil, text
}

// addCalls adds the "calls:" line of a scenario's report to the release's counts per verb.
func addCalls(verbs map[string]int, report string) {
	for _, line := range strings.Split(report, "\n") {
		rest, found := strings.CutPrefix(strings.TrimSpace(line), "calls: ")
		if !found {
			continue
		}
		for _, part := range strings.Split(rest, ", ") {
			var verb string
			var n int
			if _, err := fmt.Sscanf(part, "%s %d", &verb, &n); err == nil {
				verbs[verb] += n
			}
		}
	}
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "e2e-volcano:", err)
	os.Exit(2)
}
