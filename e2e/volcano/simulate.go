package main

// What-if runs for `policy-extender simulate`: Volcano's scheduler on a cluster given as data,
// against a real `policy-extender serve` on a policy directory, its outcome printed as JSON.
// The cluster is either a recorded onSessionOpen body (one cycle on the recorded cluster) or a
// hand-written case in the scenario format (its cycles, events and durations; no expectations
// needed). The Python command runs this once per policy set and compares the outcomes.

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	"volcano.sh/volcano/pkg/scheduler/conf"

	"policy-extender/e2e/volcano/internal/harness"
)

// SimulateOptions are the -simulate mode's flags.
type SimulateOptions struct {
	Input     string   // an onSessionOpen body (.json) or a case (.yaml)
	PolicyDir string   // the policies served (every *.policy file of it)
	Conf      string   // the scheduler conf (default: the case's, else the shipped one)
	Actions   string   // replaces the conf's actions
	Serve     []string // more options of policy-extender serve (--record DIR)
}

// SimulateReport is what -simulate prints: one outcome per cycle.
type SimulateReport struct {
	Release string          `json:"release"`
	Input   string          `json:"input"`
	Cycles  []SimulateCycle `json:"cycles"`
	// Why is what `policy-extender why` says, after the run, of each job of a case and of each
	// pod evicted.
	Why map[string]string `json:"why,omitempty"`
}

// SimulateCycle is one cycle's outcome.
type SimulateCycle struct {
	Binds     map[string]string `json:"binds"`
	Evictions []string          `json:"evictions"`
	Pipelined map[string]string `json:"pipelined"`
	Phases    map[string]string `json:"phases"`
	Calls     map[string]int    `json:"calls"`
	Panic     string            `json:"panic,omitempty"`
}

// RunSimulate runs the input and writes the report as JSON.
func RunSimulate(report io.Writer, release, repo string, command []string, work string, o SimulateOptions) error {
	var s *Scenario
	var objs *Objects
	jobNames := map[string]string{}
	caseDir := "."
	switch strings.ToLower(filepath.Ext(o.Input)) {
	case ".json":
		var err error
		if objs, jobNames, err = LoadSnapshot(o.Input); err != nil {
			return err
		}
		s = &Scenario{Name: filepath.Base(o.Input)}
	case ".yaml", ".yml":
		var err error
		if s, err = loadCase(o.Input); err != nil {
			return err
		}
		caseDir = filepath.Dir(o.Input)
		for _, j := range s.allJobs() {
			jobNames[namespaceOf(j)+"/"+PodGroupName(j)] = namespaceOf(j) + "/" + j.Name
		}
	default:
		return fmt.Errorf("%s: give an onSessionOpen body (.json) or a case (.yaml)", o.Input)
	}

	policies, err := casePolicies(s, caseDir, o.PolicyDir)
	if err != nil {
		return err
	}
	svc, err := harness.StartService(command, work, policies, append(append([]string{}, s.Serve...), o.Serve...))
	if err != nil {
		return err
	}
	defer svc.Stop()
	proxy, err := StartProxy(svc.URL, s.Fault, svc.Kill)
	if err != nil {
		return err
	}
	defer proxy.Close()

	confFile := o.Conf
	switch {
	case confFile == "" && s.Conf != "":
		confFile = filepath.Join(caseDir, s.Conf)
	case confFile == "":
		confFile = filepath.Join(repo, "docker/k8s/sidecar/volcano-scheduler.conf")
	}
	actionsLine := o.Actions
	if actionsLine == "" {
		actionsLine = s.Actions
	}
	actions, tiers, configurations, err := LoadConf(confFile, actionsLine, proxy.URL, s.Extender)
	if err != nil {
		return err
	}
	for action, arguments := range s.Configurations {
		configurations = append(configurations, conf.Configuration{Name: action, Arguments: arguments})
	}

	out := SimulateReport{Release: release, Input: o.Input}
	var cycles []*Outcome
	if objs != nil {
		outcome, err := RunCycle(objs, actions, tiers, configurations, jobNames)
		if err != nil {
			return err
		}
		outcome.Calls = proxy.Calls()
		cycles = []*Outcome{outcome}
	} else {
		r := &Result{Scenario: s, Release: release}
		if err := r.runCycles(s, actions, tiers, configurations, jobNames, proxy, svc, command, Expect{}); err != nil {
			return err
		}
		cycles = r.Cycles
		out.Why = whyTexts(s, cycles, svc, command)
	}
	for _, c := range cycles {
		out.Cycles = append(out.Cycles, SimulateCycle{Binds: c.Binds, Evictions: nonNil(c.Evictions),
			Pipelined: c.Pipelined, Phases: c.Phases, Calls: c.Calls, Panic: c.Panic})
	}
	enc := json.NewEncoder(report)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

// loadCase reads a hand-written case: the scenario format, its expectations optional.
func loadCase(file string) (*Scenario, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	// An outcome case's keys; its name, note and expect (policy-extender test's) are not read.
	var raw map[string]any
	if err := yaml.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	for _, key := range []string{"name", "note", "expect"} {
		delete(raw, key)
	}
	data, err = json.Marshal(raw)
	if err != nil {
		return nil, err
	}
	s := &Scenario{}
	if err := yaml.UnmarshalStrict(data, s); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	s.File, s.Name = file, strings.TrimSuffix(filepath.Base(file), filepath.Ext(file))
	for _, j := range s.Cluster.Jobs {
		if len(j.Tasks) == 0 {
			return nil, fmt.Errorf("%s: job %s has no tasks", file, j.Name)
		}
	}
	if err := s.validateCycles(); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return s, nil
}

// casePolicies is what the service serves: every *.policy and *values.yaml file of dir (not
// hidden), then the case's own
// (policies: inline, policyFiles: relative to the case's directory).
func casePolicies(s *Scenario, caseDir, dir string) (map[string]string, error) {
	out := map[string]string{}
	if dir != "" {
		// What serve reads of a policy directory: the policies and their parameters' values.
		files, err := filepath.Glob(filepath.Join(dir, "*.policy"))
		if err != nil {
			return nil, err
		}
		values, _ := filepath.Glob(filepath.Join(dir, "*values.yaml"))
		files = append(files, values...)
		if len(files) == 0 {
			return nil, fmt.Errorf("%s: no *.policy file in this directory", dir)
		}
		for _, f := range files {
			if strings.HasPrefix(filepath.Base(f), ".") {
				continue
			}
			text, err := os.ReadFile(f)
			if err != nil {
				return nil, err
			}
			out[filepath.Base(f)] = string(text)
		}
	}
	own, err := harness.PolicyTexts(caseDir, s.Policies, s.PolicyFiles)
	if err != nil {
		return nil, err
	}
	for name, text := range own {
		if _, taken := out[name]; taken {
			return nil, fmt.Errorf("policy %s is both in %s and in the case", name, dir)
		}
		out[name] = text
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no policies: give a policy directory or policies in the case")
	}
	return out, nil
}

// whyTexts asks `policy-extender why` about each job of the case and each evicted pod.
func whyTexts(s *Scenario, cycles []*Outcome, svc *harness.Service, command []string) map[string]string {
	names := map[string]bool{}
	for _, j := range s.allJobs() {
		names[namespaceOf(j)+"/"+j.Name] = true
	}
	for _, c := range cycles {
		for _, pod := range c.Evictions {
			names[pod] = true
		}
	}
	sorted := make([]string, 0, len(names))
	for name := range names {
		sorted = append(sorted, name)
	}
	sort.Strings(sorted)
	time.Sleep(200 * time.Millisecond) // the tally is flushed every 50 ms (--tally-flush-seconds)
	out := map[string]string{}
	for _, name := range sorted {
		text, _ := svc.Why(command, name)
		out[name] = strings.TrimRight(text, "\n")
	}
	return out
}

func nonNil(in []string) []string {
	if in == nil {
		return []string{}
	}
	return in
}
