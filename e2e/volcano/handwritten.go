package main

// The two Go extenders of the cost benchmark, each served by this same binary in a process of
// its own (`e2e-volcano -serve-extender constant|handwritten -bind 127.0.0.1:PORT`), as
// policy-extender serve is: so none of them shares the harness's process, its garbage collector
// or its scheduling of goroutines with Volcano.
//
// constant: every verb answered with its neutral constant after reading the body: the floor.
//
// handwritten: the rules of bench/rules.policy as a team without policy-extender would write
// them: net/http, encoding/json into typed structs of only the fields the rules read (the
// decoder still scans every byte, as any encoding/json user's does), the victims echoed back as
// the raw objects received (Volcano keeps the returned objects as its victims).

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
)

// ServeExtender runs one of the Go extenders until the process is killed.
func ServeExtender(kind, bind string) error {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) })
	switch kind {
	case "constant":
		for verb, answer := range neutralAnswers {
			answer := []byte(answer)
			mux.HandleFunc("POST /"+verb, func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
				writeJSON(w, answer)
			})
		}
	case "handwritten":
		mux.HandleFunc("POST /predicate", handlePredicate)
		mux.HandleFunc("POST /prioritize", handlePrioritize)
		mux.HandleFunc("POST /preemptable", handleVictims)
		mux.HandleFunc("POST /reclaimable", handleVictims)
		for verb, answer := range neutralAnswers {
			if ruled[verb] {
				continue
			}
			answer := []byte(answer)
			mux.HandleFunc("POST /"+verb, func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body) // no rule reads the session or the events
				writeJSON(w, answer)
			})
		}
	default:
		return fmt.Errorf("no extender %q (constant, handwritten)", kind)
	}
	return http.ListenAndServe(bind, mux)
}

// ruled are the verbs the hand-written extender's rules answer.
var ruled = map[string]bool{"predicate": true, "prioritize": true, "preemptable": true, "reclaimable": true}

// neutralAnswers is what an extender with no opinion answers, per verb of the shipped conf.
var neutralAnswers = map[string]string{
	"onSessionOpen":  `{}`,
	"onSessionClose": `{}`,
	"predicate":      `{"status":"","code":0}`,
	"prioritize":     `{"nodeScore":{},"errorMessage":""}`,
	"preemptable":    `{"status":0,"victims":null}`,
	"reclaimable":    `{"status":0,"victims":null}`,
	"jobEnqueueable": `{"status":0}`,
	"jobEnqueued":    `{}`,
	"queueOverused":  `{"overused":false}`,
	"jobReady":       `{"status":true}`,
	"allocateFunc":   `{"errorMessage":""}`,
	"deallocateFunc": `{"errorMessage":""}`,
}

func writeJSON(w http.ResponseWriter, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(body)
}

// The fields the rules read, in Volcano's wire shape (Go field names; keys match case-insensitively).

type wireResource struct {
	MilliCPU        float64
	ScalarResources map[string]float64
}

func (r wireResource) cpu() float64 { return r.MilliCPU / 1000 }
func (r wireResource) gpu() float64 { return r.ScalarResources[gpuResource] / 1000 }

type wireMeta struct {
	Metadata struct {
		Labels      map[string]string `json:"labels"`
		Annotations map[string]string `json:"annotations"`
	} `json:"metadata"`
}

type wireTask struct {
	Name, Namespace string
	Resreq          wireResource
	Pod             wireMeta
}

type wireNode struct {
	Name                    string
	Node                    wireMeta
	Idle, Used, Allocatable wireResource
}

// fits is the zone filter: an empty reason when the task may run on the node.
func fits(task *wireTask, node *wireNode) (reason string, code int) {
	taskZone, named := task.Pod.Metadata.Annotations[zoneAnnotation]
	if !named {
		return "", 0
	}
	nodeZone, labelled := node.Node.Metadata.Labels[zoneLabel]
	if !labelled || nodeZone != taskZone {
		return fmt.Sprintf("node zone %s is not the task's zone %s", nodeZone, taskZone), 3 // unresolvable
	}
	return "", 0
}

// score is the GPU-or-CPU score.
func score(task *wireTask, node *wireNode) float64 {
	if task.Resreq.gpu() > 0 {
		return 10*node.Used.gpu() + node.Idle.cpu()
	}
	penalty := 0.0
	if node.Allocatable.gpu() > 0 {
		penalty = 100
	}
	return node.Idle.cpu() - penalty
}

func handlePredicate(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Task wireTask
		Node wireNode
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	reason, code := fits(&req.Task, &req.Node)
	reply, _ := json.Marshal(map[string]any{"status": reason, "code": code})
	writeJSON(w, reply)
}

func handlePrioritize(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Task  wireTask
		Nodes []wireNode
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	scores := make(map[string]float64, len(req.Nodes))
	for i := range req.Nodes {
		scores[req.Nodes[i].Name] = score(&req.Task, &req.Nodes[i])
	}
	reply, _ := json.Marshal(map[string]any{"nodeScore": scores, "errorMessage": ""})
	writeJSON(w, reply)
}

// handleVictims is the victim rule, for preemptable and reclaimable alike: every evictee not
// annotated protected may go; none: Permit with no victims; no evictee at all: Abstain.
func handleVictims(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Evictees []json.RawMessage
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if len(req.Evictees) == 0 {
		writeJSON(w, []byte(`{"status":0,"victims":null}`))
		return
	}
	victims := []json.RawMessage{}
	for _, raw := range req.Evictees {
		var evictee wireTask
		if err := json.Unmarshal(raw, &evictee); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if evictee.Pod.Metadata.Annotations[protectedKey] != "true" {
			victims = append(victims, raw)
		}
	}
	reply, _ := json.Marshal(map[string]any{"status": 1, "victims": victims})
	writeJSON(w, reply)
}
