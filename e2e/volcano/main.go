// Command e2e-volcano runs Volcano's own scheduler code against a real policy-extender: each
// scenario (an outcome case, written by `policy-extender test` into -scenarios) is one whole
// scheduling cycle (Volcano's conf loader, OpenSession with the extender plugin, the real actions
// and plugins, CloseSession) against `policy-extender serve` on loopback, reported as one JSON
// object: what Volcano did. policy-extender compares it with the case (one format, one loader,
// one comparison: policy_extender/fixture_runner). Built once per Volcano release
// (scripts/build-engine, or policy-extender into the user's cache).
package main

import (
	"encoding/json"
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
	f.Define("e2e-volcano", "Volcano", "e2e/volcano/.build/scenarios",
		"the policy-extender repository (its shipped scheduler conf)", "(unused: every result is printed)")
	bench := flag.String("bench", "", "run the cost benchmark instead: SIZES as NODESxPODS[,NODESxPODS]")
	rounds := flag.Int("rounds", 5, "benchmark: cycles timed per variant and size")
	one := flag.String("one", "", "run only this scenario, in this process (the parent runs each scenario so)")
	serveExtender := flag.String("serve-extender", "", "benchmark (internal): serve the Go extender constant or handwritten on -bind")
	bind := flag.String("bind", "127.0.0.1:0", "benchmark (internal): the address of -serve-extender")
	benchCycle := flag.String("bench-cycle", "", "benchmark (internal): run one cycle against this extender URL (none: without), or marshal")
	benchSize := flag.String("bench-size", "", "benchmark (internal): NODESxPODS of -bench-cycle")
	flag.Bool("json", true, "report each scenario's actual outcome as one JSON object per line (the only mode: policy-extender test compares)")
	simulate := flag.String("simulate", "", "simulate (for policy-extender simulate): run this onSessionOpen body (.json) or case (.yaml) and print the outcome as JSON")
	policyDir := flag.String("policy-dir", "", "simulate: the policies to serve (every *.policy and *values.yaml file of this directory)")
	schedulerConf := flag.String("scheduler-conf", "", "simulate: the scheduler conf (default: the case's, else the shipped sidecar conf)")
	actionsLine := flag.String("actions", "", "simulate: replaces the conf's actions (\"enqueue, allocate\")")
	serveArgs := flag.String("serve-args", "", "simulate: more options of policy-extender serve, split on spaces (\"--record DIR\")")
	benchDerived := flag.String("bench-derived", "", "run the derived-conf benchmark instead: SIZES as NODESxPODS[,NODESxPODS]")
	flag.StringVar(&benchConf, "bench-conf", "", "benchmark (internal): the scheduler conf of -bench-cycle (default: the shipped one)")
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
	if *simulate != "" {
		o := SimulateOptions{Input: *simulate, PolicyDir: *policyDir, Conf: *schedulerConf,
			Actions: *actionsLine, Serve: strings.Fields(*serveArgs)}
		if err := RunSimulate(report, f.Release, f.Repo, command, f.Work, o); err != nil {
			fatal(err)
		}
		return
	}
	if *benchDerived != "" {
		if err := RunDerivedBench(report, f.Release, f.Repo, command, f.Work, *benchDerived, *rounds); err != nil {
			fatal(err)
		}
		return
	}
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
				line, _ := json.Marshal(result.JSON())
				fmt.Fprintln(report, string(line))
				return
			}
		}
		fatal(fmt.Errorf("no scenario %q", *one))
	}
	for _, s := range all {
		if filter != nil && !filter.MatchString(s.Name) {
			continue
		}
		if !s.AppliesTo(f.Release) {
			continue
		}
		ok, text := runIsolated(s.Name)
		fmt.Fprint(report, jsonLine(s.Name, f.Release, ok, text))
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

// jsonLine is a child's JSON line, or one saying how the child failed (a crash of Volcano's
// code outside the actions, a harness error) when it printed none.
func jsonLine(name, release string, ok bool, text string) string {
	text = strings.TrimSpace(text)
	if strings.HasPrefix(text, "{") {
		return text + "\n"
	}
	line, _ := json.Marshal(JSONResult{Name: name, Release: release, Error: "the harness printed no result: " + text})
	return string(line) + "\n"
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "e2e-volcano:", err)
	os.Exit(2)
}
