package main

// A scenario run: what Volcano did, for policy-extender to compare (outcome.go's JSON).

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"sort"
	"time"
	"volcano.sh/volcano/pkg/scheduler/conf"

	"policy-extender/e2e/volcano/internal/harness"
)

// Result is one scenario on one release.
type Result struct {
	Scenario *Scenario
	Release  string
	Outcome  *Outcome
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

// RunScenario starts the service, runs the cycle and reads what Volcano did.
func RunScenario(s *Scenario, release, repo string, command []string, work string) *Result {
	r := &Result{Scenario: s, Release: release}
	objs, err := s.Cluster.Build()
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
	for _, j := range s.Cluster.Jobs {
		jobNames[namespaceOf(j)+"/"+PodGroupName(j)] = namespaceOf(j) + "/" + j.Name
	}
	r.Outcome, err = RunCycle(objs, actions, tiers, configurations, jobNames)
	if err != nil {
		r.Err = err
		return r
	}
	r.Tiers = switchesOf(tiers)
	r.Calls, r.Failed, r.Victims = proxy.Calls(), proxy.Failures(), proxy.VictimCalls()
	r.askWhy(s.Expect.For(release).Why, svc, command)
	r.Decisions = decisionLines(svc.URL)
	r.VictimWhy = victimWhy(svc.URL, r.Victims)
	r.ServiceLog = svc.Log()
	return r
}

// askWhy asks `policy-extender why` about each object the case names (policy-extender checks
// the lines it must hold).
func (r *Result) askWhy(want map[string][]string, svc *harness.Service, command []string) {
	if len(want) == 0 {
		return
	}
	names := make([]string, 0, len(want))
	for name := range want {
		names = append(names, name)
	}
	sort.Strings(names)
	time.Sleep(200 * time.Millisecond) // the tally is flushed every 50 ms (--tally-flush-seconds)
	r.WhyText = map[string]string{}
	for _, name := range names {
		text, err := svc.Why(command, name)
		if err != nil {
			text += fmt.Sprintf("\n(policy-extender why: %v)", err)
		}
		r.WhyText[name] = text
	}
}

func sortedCopy(in []string) []string {
	out := append([]string{}, in...)
	sort.Strings(out)
	return out
}
