package main

// A scenario run: what Volcano did in each cycle and over the run, for policy-extender to
// compare (outcome.go's JSON).

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"sort"
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
	Cycles   []*Outcome // each cycle's, with what `why` said right after it (CycleWhy)
	CycleWhy []map[string]string
	Calls    map[string]int
	Failed   map[string]int
	Err      error
	// WhyText is what `why` printed per name of expect.why; Victims the proxy's victim calls;
	// Tiers the conf's victim switches; ServiceLog the service's log (-json mode).
	WhyText    map[string]string
	Victims    []VictimCall
	Tiers      [][]PluginSwitches
	ServiceLog string
	Decisions  []string
	VictimWhy  map[string]json.RawMessage
}

// RunScenario starts the service, runs the cycles and reads what Volcano did.
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
	if !filepath.IsAbs(confFile) {
		confFile = filepath.Join(repo, confFile)
	}
	actions, tiers, configurations, err := LoadConf(confFile, s.Actions, proxy.URL, s.Extender)
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
	r.Tiers = switchesOf(tiers)
	r.Calls, r.Failed, r.Victims = proxy.Calls(), proxy.Failures(), proxy.VictimCalls()
	r.WhyText = r.askWhy(want.Why, svc, command)
	r.Decisions = decisionLines(svc.URL)
	r.VictimWhy = victimWhy(svc.URL, r.Victims)
	r.ServiceLog = svc.Log()
	return r
}

// runCycles runs the scenario's cycles one after the other against the same service, the
// cluster evolving between them (cycles.go); after cycle N it asks `why` about the names of
// expect.cycle.N.why (policy-extender compares every cycle's outcome itself).
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
		r.CycleWhy = append(r.CycleWhy, r.askWhy(want.Cycle[cycle].Why, svc, command))
		if out.Panic != "" { // the scheduler crashed: no next cycle
			break
		}
		state.Apply(out, cycle)
	}
	return nil
}

// askWhy asks `policy-extender why` about each object the case names (policy-extender checks
// the lines it must hold).
func (r *Result) askWhy(want map[string][]string, svc *harness.Service, command []string) map[string]string {
	if len(want) == 0 {
		return nil
	}
	names := make([]string, 0, len(want))
	for name := range want {
		names = append(names, name)
	}
	sort.Strings(names)
	time.Sleep(200 * time.Millisecond) // the tally is flushed every 50 ms (--tally-flush-seconds)
	texts := map[string]string{}
	for _, name := range names {
		text, err := svc.Why(command, name)
		if err != nil {
			text += fmt.Sprintf("\n(policy-extender why: %v)", err)
		}
		texts[name] = text
	}
	return texts
}

func sortedCopy(in []string) []string {
	out := append([]string{}, in...)
	sort.Strings(out)
	return out
}
