package main

// A scenario run and its comparison with the expected outcome.

import (
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"time"
	"volcano.sh/volcano/pkg/scheduler/conf"
	"volcano.sh/volcano/pkg/scheduler/framework"

	"policy-extender/e2e/volcano/internal/harness"
)

// Result is one scenario on one release.
type Result struct {
	Scenario *Scenario
	Release  string
	Outcome  *Outcome   // the run's (the one cycle's, when there is one)
	Cycles   []*Outcome // each cycle's
	Calls    map[string]int
	Failed   map[string]int
	Problems []string
	Err      error
}

// OK says whether the scenario passed.
func (r *Result) OK() bool { return r.Err == nil && len(r.Problems) == 0 }

// Format is the report of one scenario: a line, then each problem with expected and actual.
func (r *Result) Format() string {
	var b strings.Builder
	harness.WriteHead(&b, r.OK(), r.Scenario.Name, r.Release, r.Err, r.Problems)
	if len(r.Cycles) > 1 {
		b.WriteString(formatCycles(r.Cycles))
	}
	if r.Calls != nil {
		fmt.Fprintf(&b, "      calls: %s\n", harness.FormatCounts(r.Calls))
		if len(r.Failed) > 0 {
			fmt.Fprintf(&b, "      failed calls: %s\n", harness.FormatCounts(r.Failed))
		}
	}
	return b.String()
}

// RunScenario starts the service, runs the cycle and checks the outcome.
func RunScenario(s *Scenario, release, repo string, command []string, work string) *Result {
	r := &Result{Scenario: s, Release: release}
	_, err := s.Cluster.Build() // the cluster's errors before the service starts
	if err != nil {
		r.Err = err
		return r
	}
	policies, err := harness.PolicyTexts(repo, s.Policies, s.PolicyFiles)
	if err != nil {
		r.Err = err
		return r
	}
	svc, err := harness.StartService(command, work, policies, s.Serve)
	if err != nil {
		r.Err = err
		return r
	}
	defer svc.Stop()
	proxy, err := StartProxy(svc.URL, s.Fault, svc.Kill)
	if err != nil {
		r.Err = err
		return r
	}
	defer proxy.Close()
	confFile := s.Conf
	if confFile == "" {
		confFile = "docker/k8s/sidecar/volcano-scheduler.conf"
	}
	actions, tiers, configurations, err := LoadConf(filepath.Join(repo, confFile), s.Actions, proxy.URL, s.Extender)
	if err != nil {
		r.Err = err
		return r
	}
	for action, arguments := range s.Configurations {
		configurations = append(configurations, conf.Configuration{Name: action, Arguments: arguments})
	}
	jobNames := map[string]string{}
	for _, j := range s.allJobs() {
		jobNames[namespaceOf(j)+"/"+PodGroupName(j)] = namespaceOf(j) + "/" + j.Name
	}
	want := s.Expect.For(release)
	if err := r.runCycles(s, actions, tiers, configurations, jobNames, proxy, svc, command, want); err != nil {
		r.Err = err
		return r
	}
	r.Outcome = runOutcome(r.Cycles)
	r.Calls, r.Failed = proxy.Calls(), proxy.Failures()
	r.check(want)
	if len(r.Cycles) > 1 {
		r.checkRun(want)
	}
	r.checkWhy("", want.Why, svc, command)
	if !r.OK() {
		r.Problems = append(r.Problems, "service log:\n"+indent(svc.Log()))
	}
	return r
}

// runCycles runs the scenario's cycles one after the other against the same service, the
// cluster evolving between them (cycles.go), and checks each cycle's own expectations.
func (r *Result) runCycles(s *Scenario, actions []framework.Action, tiers []conf.Tier, configurations []conf.Configuration,
	jobNames map[string]string, proxy *Proxy, svc *harness.Service, command []string, want Expect) error {
	state, err := newClusterState(s)
	if err != nil {
		return err
	}
	for cycle := 1; cycle <= s.CycleCount(); cycle++ {
		if cycle > 1 {
			if err := state.Advance(cycle); err != nil {
				return err
			}
		}
		before := proxy.Calls()
		out, err := RunCycle(state.Objects(), actions, tiers, configurations, jobNames)
		if err != nil {
			return err
		}
		out.Calls = map[string]int{}
		for verb, n := range proxy.Calls() {
			if d := n - before[verb]; d > 0 {
				out.Calls[verb] = d
			}
		}
		r.Cycles = append(r.Cycles, out)
		if w, ok := want.Cycle[cycle]; ok {
			prefix := fmt.Sprintf("cycle %d: ", cycle)
			r.checkOutcome(prefix, w, out, out.Calls, false)
			r.checkWhy(prefix, w.Why, svc, command)
		}
		if out.Panic != "" { // the scheduler crashed: no next cycle
			break
		}
		state.Apply(out, cycle)
	}
	return nil
}

func (r *Result) problem(format string, args ...any) {
	r.Problems = append(r.Problems, fmt.Sprintf(format, args...))
}

func (r *Result) check(want Expect) {
	// One cycle: binds and evictions are complete lists even when not given (evictions: none).
	// Several: the run's, checked when given.
	r.checkOutcome("", want, r.Outcome, r.Calls, len(r.Cycles) <= 1)
}

// checkOutcome compares one outcome with what is expected of it; complete makes a missing
// binds or evictions mean "none".
func (r *Result) checkOutcome(prefix string, want Expect, got *Outcome, calls map[string]int, complete bool) {
	problem := func(format string, args ...any) { r.problem(prefix+format, args...) }
	switch {
	case want.Panic == "" && got.Panic != "":
		problem("Volcano panicked (the scheduler would crash): %s", got.Panic)
	case want.Panic != "" && !strings.Contains(got.Panic, want.Panic):
		problem("Volcano's panic: expected one containing %q, actual %q", want.Panic, got.Panic)
	}
	if want.Binds != nil || complete {
		if d := diffMaps(want.Binds, got.Binds); d != "" {
			problem("binds differ:\n%s", d)
		}
	}
	if want.Evictions != nil || complete {
		wantEvict, gotEvict := sortedCopy(want.Evictions), sortedCopy(got.Evictions)
		if strings.Join(wantEvict, ",") != strings.Join(gotEvict, ",") {
			problem("evictions differ:\n  expected %v\n  actual   %v", wantEvict, gotEvict)
		}
	}
	for pod, node := range want.Pipelined {
		// "" expects the pod not pipelined, "*" pipelined on any node
		if actual := got.Pipelined[pod]; actual != node && !(node == "*" && actual != "") {
			problem("pipelined %s: expected on %q, actual %q (all pipelined: %v)", pod, node, got.Pipelined[pod], got.Pipelined)
		}
	}
	for job, phase := range want.Phases {
		if got.Phases[job] != phase {
			problem("PodGroup phase of %s: expected %s, actual %q", job, phase, got.Phases[job])
		}
	}
	for verb, spec := range want.Calls {
		n := calls[verb]
		if spec.Min != nil && n < *spec.Min || spec.Max != nil && n > *spec.Max {
			problem("Volcano called %s %d times: expected %s", verb, n, spec)
		}
	}
}

func (c CallSpec) String() string {
	switch {
	case c.Min != nil && c.Max != nil && *c.Min == *c.Max:
		return fmt.Sprintf("exactly %d", *c.Min)
	case c.Min != nil && c.Max != nil:
		return fmt.Sprintf("%d to %d", *c.Min, *c.Max)
	case c.Min != nil:
		return fmt.Sprintf("at least %d", *c.Min)
	case c.Max != nil:
		return fmt.Sprintf("at most %d", *c.Max)
	}
	return "any number"
}

// checkWhy asks `policy-extender why` about each named object; its text must hold each line.
func (r *Result) checkWhy(prefix string, want map[string][]string, svc *harness.Service, command []string) {
	if len(want) == 0 {
		return
	}
	names := make([]string, 0, len(want))
	for name := range want {
		names = append(names, name)
	}
	sort.Strings(names)
	time.Sleep(200 * time.Millisecond) // the tally is flushed every 50 ms (--tally-flush-seconds)
	for _, name := range names {
		text, err := svc.Why(command, name)
		for _, line := range want[name] {
			if !strings.Contains(text, line) {
				r.problem(prefix+"why %s: expected a line containing %q; it said (%v):\n%s", name, line, err, indent(text))
			}
		}
	}
}

func diffMaps(want, got map[string]string) string {
	keys := map[string]bool{}
	for k := range want {
		keys[k] = true
	}
	for k := range got {
		keys[k] = true
	}
	var lines []string
	for k := range keys {
		w, inWant := want[k]
		g, inGot := got[k]
		switch {
		case !inWant:
			lines = append(lines, fmt.Sprintf("  %s: expected no bind, actual -> %s", k, g))
		case !inGot:
			lines = append(lines, fmt.Sprintf("  %s: expected -> %s, actual not bound", k, w))
		case w != g && w != "*":
			lines = append(lines, fmt.Sprintf("  %s: expected -> %s, actual -> %s", k, w, g))
		}
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

func sortedCopy(in []string) []string {
	out := append([]string{}, in...)
	sort.Strings(out)
	return out
}

func indent(text string) string {
	return "  | " + strings.ReplaceAll(strings.TrimRight(text, "\n"), "\n", "\n  | ")
}
