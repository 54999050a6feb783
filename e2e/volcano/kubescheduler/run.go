package main

// One scenario: the service and its proxy, kube-scheduler's extender client and scheduling loop
// against them, and the comparison with what the scenario expects.

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"time"

	"policy-extender/e2e/volcano/internal/harness"
)

// Result is one scenario on one release.
type Result struct {
	Scenario *Scenario
	Release  string
	Calls    []Call
	Outcome  *ScheduleOutcome // the scheduling loop's, when the scenario runs it
	Problems []string
	Err      error
	Log      string
}

// OK says whether the scenario passed.
func (r *Result) OK() bool { return r.Err == nil && len(r.Problems) == 0 }

// Format is the report of one scenario: a line, then each problem; on failure the calls.
func (r *Result) Format(verbose bool) string {
	var b strings.Builder
	harness.WriteHead(&b, r.OK(), r.Scenario.Name, "kube-scheduler "+r.Release, r.Err, r.Problems)
	if o := r.Outcome; o != nil && (verbose || !r.OK()) {
		fmt.Fprintf(&b, "      scheduled: bound to %q, preempted %v, nominated %q\n", o.Bind, o.Preempted, o.Nominated)
		for _, e := range o.Failed {
			fmt.Fprintf(&b, "      FailedScheduling: %s\n", e)
		}
	}
	counts := map[string]int{}
	for _, c := range r.Calls {
		counts[c.Verb]++
	}
	fmt.Fprintf(&b, "      calls: %s\n", formatCounts(counts))
	if !r.OK() || verbose {
		for i, c := range r.Calls {
			if i == 6 && !verbose {
				fmt.Fprintf(&b, "      ... %d more calls\n", len(r.Calls)-i)
				break
			}
			fmt.Fprintf(&b, "      %s -> %d\n        sent:     %s\n        answered: %s\n", c.Verb, c.Status, compact(c.Request), compact(c.Response))
		}
	}
	if !r.OK() && r.Log != "" {
		fmt.Fprintf(&b, "      service log:\n        %s\n", strings.ReplaceAll(r.Log, "\n", "\n        "))
	}
	return b.String()
}

func formatCounts(counts map[string]int) string {
	if len(counts) == 0 {
		return "none"
	}
	return harness.FormatCounts(counts)
}

// RunScenario runs one scenario against a fresh service in workDir.
func RunScenario(s *Scenario, release, repo string, command []string, workDir string) *Result {
	r := &Result{Scenario: s, Release: release}
	objs, err := BuildObjects(s)
	if err != nil {
		r.Err = err
		return r
	}
	if err := os.MkdirAll(workDir, 0o755); err != nil {
		r.Err = err
		return r
	}
	policies, err := harness.PolicyTexts(repo, s.Policies, s.PolicyFiles)
	if err != nil {
		r.Err = err
		return r
	}
	svc, err := harness.StartService(command, workDir, policies, nil)
	if err != nil {
		r.Err = err
		return r
	}
	defer svc.Stop()
	fail := map[string]int{}
	if s.Fault != nil {
		fail = s.Fault.Status
	}
	proxy, err := StartProxy(svc.URL, fail)
	if err != nil {
		r.Err = err
		return r
	}
	defer proxy.Close()
	var base map[string]any
	if s.Conf == "generated" {
		entry, text, err := GeneratedEntry(command, filepath.Join(workDir, "policies"), proxy.URL)
		if err != nil {
			r.Err = fmt.Errorf("%w\n%s", err, text)
			return r
		}
		base = entry
	}
	cfg, text, err := ExtenderConfig(s, proxy.URL+"/kube-scheduler", base)
	if err != nil {
		r.Err = fmt.Errorf("%w\n%s", err, text)
		return r
	}
	if s.Volcano != nil {
		r.Problems = append(r.Problems, callVolcano(svc.URL, repo, s.Volcano)...)
	}
	if s.Fault != nil && s.Fault.Stop { // nothing listens any more: the client's connection is refused
		svc.Kill()
		proxy.Close()
	}
	ext, err := NewExtender(cfg)
	if err != nil {
		r.Err = fmt.Errorf("NewHTTPExtender: %w", err)
		return r
	}
	e := s.Expect
	if e.Filter != nil {
		got, problems := CallFilter(ext, objs)
		r.Problems = append(r.Problems, problems...)
		r.Problems = append(r.Problems, compareFilter(*e.Filter, got)...)
	}
	if e.Prioritize != nil {
		scores, _, err, problems := CallPrioritize(ext, objs)
		r.Problems = append(r.Problems, problems...)
		r.Problems = append(r.Problems, compareError("prioritize", e.Prioritize.Error, err)...)
		if err == nil && e.Prioritize.Error == "" && !sameMap(scores, e.Prioritize.Scores) {
			r.Problems = append(r.Problems, fmt.Sprintf("prioritize: scores %v, want %v", scores, e.Prioritize.Scores))
		}
	}
	if e.Preempt != nil {
		proposed, err := objs.Victims(s)
		if err != nil {
			r.Err = err
			return r
		}
		victims, err, problems := CallPreempt(ext, objs, proposed)
		r.Problems = append(r.Problems, problems...)
		r.Problems = append(r.Problems, compareError("preempt", e.Preempt.Error, err)...)
		if err == nil && e.Preempt.Error == "" && !sameMap(victims, e.Preempt.Victims) {
			r.Problems = append(r.Problems, fmt.Sprintf("preempt: victims %v, want %v", victims, e.Preempt.Victims))
		}
	}
	if e.Schedule != nil {
		got, err := RunScheduler(objs, cfg, e.Schedule, 20*time.Second)
		if err != nil {
			r.Err = fmt.Errorf("scheduler.New: %w", err)
		} else {
			r.Outcome = got
			r.Problems = append(r.Problems, compareSchedule(*e.Schedule, got)...)
		}
	}
	r.Calls = proxy.Calls()
	if e.Calls != nil {
		counts := map[string]int{}
		for _, c := range r.Calls {
			counts[c.Verb]++
		}
		for verb, n := range e.Calls {
			if counts[verb] != n {
				r.Problems = append(r.Problems, fmt.Sprintf("calls: %s called %d times, want %d", verb, counts[verb], n))
			}
		}
	}
	if !r.OK() {
		r.Log = svc.Log()
	}
	return r
}

func compareError(verb, want string, got error) []string {
	switch {
	case want == "" && got != nil:
		return []string{fmt.Sprintf("%s: kube-scheduler's client failed: %v", verb, got)}
	case want != "" && got == nil:
		return []string{fmt.Sprintf("%s: no error, want one containing %q", verb, want)}
	case want != "" && !strings.Contains(got.Error(), want):
		return []string{fmt.Sprintf("%s: error %q, want one containing %q", verb, got.Error(), want)}
	}
	return nil
}

func compareFilter(want FilterExpect, got FilterResult) []string {
	problems := compareError("filter", want.Error, got.Err)
	if got.Err != nil || want.Error != "" {
		return problems
	}
	if !sameList(got.Nodes, want.Nodes) {
		problems = append(problems, fmt.Sprintf("filter: nodes %v, want %v", got.Nodes, want.Nodes))
	}
	if !sameMap(map[string]string(got.Failed), want.Failed) {
		problems = append(problems, fmt.Sprintf("filter: FailedNodes %v, want %v", got.Failed, want.Failed))
	}
	if !sameMap(map[string]string(got.Unresolvable), want.Unresolvable) {
		problems = append(problems, fmt.Sprintf("filter: FailedAndUnresolvableNodes %v, want %v", got.Unresolvable, want.Unresolvable))
	}
	return problems
}

func compareSchedule(want ScheduleExpect, got *ScheduleOutcome) []string {
	var problems []string
	if want.Bind != "*" && got.Bind != want.Bind {
		problems = append(problems, fmt.Sprintf("schedule: bound to %q, want %q", got.Bind, want.Bind))
	}
	for _, text := range want.Failed {
		if !anyContains(got.Failed, text) {
			problems = append(problems, fmt.Sprintf("schedule: no FailedScheduling event contains %q; events: %q", text, got.Failed))
		}
	}
	if !sameList(got.Preempted, want.Preempted) {
		problems = append(problems, fmt.Sprintf("schedule: preempted %v, want %v", got.Preempted, want.Preempted))
	}
	if want.Nominated != "" && got.Nominated != want.Nominated {
		problems = append(problems, fmt.Sprintf("schedule: nominated node %q, want %q", got.Nominated, want.Nominated))
	}
	return problems
}

// callVolcano posts a Volcano verb to the same service.
func callVolcano(url, repo string, c *VolcanoCall) []string {
	body := []byte(c.Body)
	if c.BodyFile != "" {
		data, err := os.ReadFile(filepath.Join(repo, c.BodyFile))
		if err != nil {
			return []string{fmt.Sprintf("volcano %s: %v", c.Path, err)}
		}
		body = data
	}
	resp, err := http.Post(url+c.Path, "application/json", bytes.NewReader(body))
	if err != nil {
		return []string{fmt.Sprintf("volcano %s: %v", c.Path, err)}
	}
	defer resp.Body.Close()
	body, _ = io.ReadAll(resp.Body)
	var problems []string
	if resp.StatusCode != c.Status {
		problems = append(problems, fmt.Sprintf("volcano %s: status %d, want %d: %s", c.Path, resp.StatusCode, c.Status, compact(body)))
	}
	for _, text := range c.Contains {
		if !strings.Contains(string(body), text) {
			problems = append(problems, fmt.Sprintf("volcano %s: the reply does not contain %q: %s", c.Path, text, compact(body)))
		}
	}
	return problems
}

func sameList(a, b []string) bool {
	x := append([]string{}, a...)
	y := append([]string{}, b...)
	sort.Strings(x)
	sort.Strings(y)
	return len(x) == len(y) && (len(x) == 0 || reflect.DeepEqual(x, y))
}

// sameMap compares two maps, nil and empty alike.
func sameMap[V any](a, b map[string]V) bool {
	if len(a) == 0 && len(b) == 0 {
		return true
	}
	return reflect.DeepEqual(a, b)
}
