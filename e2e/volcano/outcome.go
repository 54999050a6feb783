package main

// The machine-readable mode (-json): each scenario's actual outcome as one JSON object, for
// `policy-extender test`, which compares it with an outcome case's expectations itself. The
// scenario files are then written by policy-extender from the cases (the same format: the
// fixture runner's loader checks them, this harness only decodes them).

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strings"

	"volcano.sh/volcano/pkg/scheduler/conf"
)

// JSONResult is one scenario's report in -json mode.
type JSONResult struct {
	Name      string            `json:"name"`
	Release   string            `json:"release"`
	Error     string            `json:"error,omitempty"`
	Binds     map[string]string `json:"binds"`
	Evictions []string          `json:"evictions"`
	Pipelined map[string]string `json:"pipelined"`
	Phases    map[string]string `json:"phases"`
	Panic     string            `json:"panic,omitempty"`
	ElapsedMS float64           `json:"elapsedMs"`
	Calls     map[string]int    `json:"calls"`
	Failed    map[string]int    `json:"failedCalls,omitempty"`
	// Why is what `policy-extender why NAME` printed for each name of expect.why.
	Why map[string]string `json:"why,omitempty"`
	// Victims is every preemptable and reclaimable call: who evicts, whom it could, the answer.
	Victims []VictimCall `json:"victimCalls,omitempty"`
	// Tiers is the conf's tiers as Volcano's loader left them (its defaults applied): per
	// plugin, whether its preemptable and reclaimable functions are enabled.
	Tiers [][]PluginSwitches `json:"tiers"`
	// Decisions are the service's decision counters at the end of the cycle (its /metrics lines
	// policy_extender_decisions_total{verb,protocol,rule,outcome}): which rules decided.
	Decisions []string `json:"decisions"`
	// VictimWhy is the service's GET /why?task= answer for each evictee of a victims call (at
	// most maxWhy): which rule protected it.
	VictimWhy  map[string]json.RawMessage `json:"victimWhy,omitempty"`
	ServiceLog string                     `json:"serviceLog,omitempty"`
	// Cycles is each cycle's own outcome (one entry for a case of one cycle). The fields above
	// are then the run's: every cycle's binds (a pod's last node) and evictions, the last
	// cycle's pipelined tasks and phases, the calls of the whole run, why asked after it.
	Cycles []CycleJSON `json:"cycles"`
}

// CycleJSON is what Volcano did in one cycle of several.
type CycleJSON struct {
	Binds     map[string]string `json:"binds"`
	Evictions []string          `json:"evictions"`
	Pipelined map[string]string `json:"pipelined"`
	Phases    map[string]string `json:"phases"`
	Calls     map[string]int    `json:"calls"`
	Panic     string            `json:"panic,omitempty"`
	ElapsedMS float64           `json:"elapsedMs"`
	// Why is what `policy-extender why NAME` printed right after this cycle, for each name of
	// expect.cycle.N.why.
	Why map[string]string `json:"why,omitempty"`
}

func cycleJSON(o *Outcome, why map[string]string) CycleJSON {
	out := CycleJSON{Binds: o.Binds, Evictions: sortedCopy(o.Evictions), Pipelined: o.Pipelined, Phases: o.Phases,
		Calls: o.Calls, Panic: o.Panic, ElapsedMS: float64(o.Elapsed.Microseconds()) / 1000, Why: why}
	if out.Binds == nil {
		out.Binds = map[string]string{}
	}
	if out.Pipelined == nil {
		out.Pipelined = map[string]string{}
	}
	if out.Phases == nil {
		out.Phases = map[string]string{}
	}
	if out.Calls == nil {
		out.Calls = map[string]int{}
	}
	return out
}

// PluginSwitches is one plugin of a tier and its victim switches.
type PluginSwitches struct {
	Name        string `json:"name"`
	Preemptable bool   `json:"preemptable"`
	Reclaimable bool   `json:"reclaimable"`
}

// VictimCall is one preemptable or reclaimable exchange as it went over the wire.
type VictimCall struct {
	Verb     string   `json:"verb"`
	Evictor  string   `json:"evictor"`
	Evictees []string `json:"evictees"`
	Status   int      `json:"status"`
	Victims  []string `json:"victims"`
	HTTP     int      `json:"http"`
}

func switchesOf(tiers []conf.Tier) [][]PluginSwitches {
	out := [][]PluginSwitches{}
	for _, tier := range tiers {
		row := []PluginSwitches{}
		for _, p := range tier.Plugins {
			row = append(row, PluginSwitches{Name: p.Name, Preemptable: p.EnabledPreemptable == nil || *p.EnabledPreemptable,
				Reclaimable: p.EnabledReclaimable == nil || *p.EnabledReclaimable})
		}
		out = append(out, row)
	}
	return out
}

// JSON is the result in -json form.
func (r *Result) JSON() JSONResult {
	out := JSONResult{Name: r.Scenario.Name, Release: r.Release, Binds: map[string]string{}, Evictions: []string{},
		Pipelined: map[string]string{}, Phases: map[string]string{}, Calls: r.Calls, Failed: r.Failed,
		Why: r.WhyText, Victims: r.Victims, Tiers: r.Tiers, Cycles: []CycleJSON{}}
	for i, c := range r.Cycles {
		var why map[string]string
		if i < len(r.CycleWhy) {
			why = r.CycleWhy[i]
		}
		out.Cycles = append(out.Cycles, cycleJSON(c, why))
	}
	if out.Calls == nil {
		out.Calls = map[string]int{}
	}
	if out.Tiers == nil {
		out.Tiers = [][]PluginSwitches{}
	}
	if r.Err != nil {
		out.Error = r.Err.Error()
	}
	if o := r.Outcome; o != nil {
		if o.Binds != nil {
			out.Binds = o.Binds
		}
		out.Evictions = sortedCopy(o.Evictions)
		out.Pipelined, out.Phases, out.Panic = o.Pipelined, o.Phases, o.Panic
		out.ElapsedMS = float64(o.Elapsed.Microseconds()) / 1000
	}
	out.ServiceLog = r.ServiceLog
	out.Decisions = r.Decisions
	out.VictimWhy = r.VictimWhy
	if out.Decisions == nil {
		out.Decisions = []string{}
	}
	return out
}

// decisionLines are the service's decision counters (a scrape waits for the workers' pending
// counts, so it holds every call answered before it).
func decisionLines(url string) []string {
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxRecorded))
	var out []string
	for _, line := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(line, "policy_extender_decisions_total{") || strings.HasPrefix(line, "policy_extender_audit_decisions_total{") {
			out = append(out, line)
		}
	}
	return out
}

// maxWhy bounds the /why questions asked after a cycle.
const maxWhy = 200

// victimWhy asks the service's /why about every evictee it was asked about.
func victimWhy(base string, calls []VictimCall) map[string]json.RawMessage {
	out := map[string]json.RawMessage{}
	for _, call := range calls {
		for _, name := range call.Evictees {
			if _, done := out[name]; done || len(out) >= maxWhy {
				continue
			}
			resp, err := http.Get(base + "/why?task=" + url.QueryEscape(name))
			if err != nil {
				continue
			}
			body, _ := io.ReadAll(io.LimitReader(resp.Body, maxRecorded))
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK && json.Valid(body) {
				out[name] = body
			}
		}
	}
	return out
}

// victimVerb says whether the proxy records this verb's exchanges.
func victimVerb(verb string) bool { return verb == "preemptable" || verb == "reclaimable" }

// maxRecorded bounds what the proxy keeps of one victims exchange (a request names every evictee).
const maxRecorded = 8 << 20

// recordVictims reads a victims request's names; the body is put back for the service.
func recordVictims(verb string, r *http.Request) VictimCall {
	body, _ := io.ReadAll(io.LimitReader(r.Body, maxRecorded))
	r.Body = io.NopCloser(bytes.NewReader(body))
	var req struct {
		Evictor  *taskName
		Evictees []*taskName
	}
	_ = json.Unmarshal(body, &req)
	call := VictimCall{Verb: verb, Evictees: []string{}, Victims: []string{}}
	if req.Evictor != nil {
		call.Evictor = req.Evictor.String()
	}
	for _, e := range req.Evictees {
		if e != nil {
			call.Evictees = append(call.Evictees, e.String())
		}
	}
	sort.Strings(call.Evictees)
	return call
}

type taskName struct{ Namespace, Name string }

func (t *taskName) String() string { return t.Namespace + "/" + t.Name }

// answered completes a call with the service's answer (the body the proxy passed on).
func (c *VictimCall) answered(status int, body []byte) {
	c.HTTP = status
	var resp struct {
		Status  int
		Victims []*taskName
	}
	if json.Unmarshal(body, &resp) != nil {
		return
	}
	c.Status = resp.Status
	for _, v := range resp.Victims {
		if v != nil {
			c.Victims = append(c.Victims, v.String())
		}
	}
	sort.Strings(c.Victims)
}

// bodyRecorder keeps a bounded copy of what is written through it.
type bodyRecorder struct {
	*statusRecorder
	body bytes.Buffer
}

func (b *bodyRecorder) Write(p []byte) (int, error) {
	if b.body.Len() < maxRecorded {
		b.body.Write(p)
	}
	return b.statusRecorder.Write(p)
}
