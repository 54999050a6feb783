package main

// A scenario is data: the cluster, the policies, the scheduler conf and what Volcano must do.
// policy-extender test writes them from outcome cases (e2e/volcano/cases/*.fixtures.yaml and the
// users'; policy_extender/fixture_runner/outcome_cases.py checks them); docs/e2e-volcano.md.

import (
	"fmt"
	"strings"

	"policy-extender/e2e/volcano/internal/harness"
)

// Scenario is one outcome case as policy-extender hands it over (JSON).
type Scenario struct {
	Name        string `json:"-"`
	File        string `json:"-"`
	Description string `json:"description"`
	// Since is the first release the scenario applies to (e.g. "v1.13": allocateFunc).
	Since string `json:"since,omitempty"`
	// Before is the first release the scenario no longer applies to: where Volcano changed what
	// it does, one file per behaviour, each naming the releases it was measured on.
	Before string `json:"before,omitempty"`
	// Policies maps a file name to its text; they are written to a fresh directory.
	Policies map[string]string `json:"policies,omitempty"`
	// PolicyFiles names policy files of the repository (e.g. policies/preemption.policy), served
	// as they are shipped beside Policies.
	PolicyFiles []string `json:"policyFiles,omitempty"`
	// Conf is a scheduler conf file relative to the repository (default: the shipped sidecar
	// conf), loaded by Volcano's own loader; Actions replaces its actions line.
	Conf    string `json:"conf,omitempty"`
	Actions string `json:"actions,omitempty"`
	// Extender overrides arguments of the extender plugin (extender.ignorable, ...).
	Extender map[string]any `json:"extender,omitempty"`
	// Configurations adds action arguments, as the conf's `configurations:` list does
	// (allocate: {predicateErrorCacheEnable: false}).
	Configurations map[string]map[string]any `json:"configurations,omitempty"`
	// Serve adds options to `policy-extender serve` (e.g. ["--require-session", "true"]).
	Serve   []string `json:"serve,omitempty"`
	Cluster Cluster  `json:"cluster"`
	Fault   *Fault   `json:"fault,omitempty"`
	// Cycles is how many scheduling cycles run, one after the other against the same service
	// (default 1); between two cycles the cluster evolves (cycles.go): binds become running
	// pods, evicted pods go after EvictionGrace cycles, tasks with a duration finish, and the
	// Events of the next cycle happen.
	Cycles int `json:"cycles,omitempty"`
	// EvictionGrace is how many cycles an evicted pod stays, terminating (Volcano's Releasing),
	// before it is gone (default 1).
	EvictionGrace *int    `json:"evictionGrace,omitempty"`
	Events        []Event `json:"events,omitempty"`
	Expect        Expect  `json:"expect"`
}

// Event changes the cluster before cycle Before (2 to Cycles), after the previous cycle's
// outcome was applied.
type Event struct {
	Before   int    `json:"before"`
	AddJobs  []Job  `json:"addJobs,omitempty"`
	AddNodes []Node `json:"addNodes,omitempty"`
	// RemoveNodes deletes nodes and the pods bound to them.
	RemoveNodes []string `json:"removeNodes,omitempty"`
	Cordon      []string `json:"cordon,omitempty"`
	Uncordon    []string `json:"uncordon,omitempty"`
	// DeletePods deletes pods (ns/name) at once, as `kubectl delete --force` does.
	DeletePods []string `json:"deletePods,omitempty"`
}

// Fault makes the service fail the way a deployment can.
type Fault struct {
	// Stop kills the service (SIGKILL, every process) once Volcano has called this verb
	// Count times; later calls find nothing listening.
	Stop *VerbCount `json:"stop,omitempty"`
	// Delay holds every answer to these verbs this long before passing it on.
	Delay map[string]string `json:"delay,omitempty"`
	// Fail answers every call of these verbs with this HTTP status instead of the service (the
	// service refusing the call: a 503 while its store is down, a 413 for a body over its limit).
	Fail map[string]int `json:"fail,omitempty"`
}

// VerbCount names a verb and how many of its calls go through first.
type VerbCount struct {
	Verb  string `json:"verb"`
	Count int    `json:"count"`
}

// Cluster is what the scheduler cache holds when the session opens.
type Cluster struct {
	PriorityClasses map[string]int32 `json:"priorityClasses,omitempty"`
	Queues          []Queue          `json:"queues,omitempty"`
	Nodes           []Node           `json:"nodes"`
	// NodeSets makes many alike nodes: name-000, name-001, ...
	NodeSets []NodeSet `json:"nodeSets,omitempty"`
	Jobs     []Job     `json:"jobs"`
}

type Queue struct {
	Name        string            `json:"name"`
	Weight      int32             `json:"weight,omitempty"`
	Capability  map[string]string `json:"capability,omitempty"`
	Reclaimable *bool             `json:"reclaimable,omitempty"`
}

type Node struct {
	Name          string            `json:"name"`
	Labels        map[string]string `json:"labels,omitempty"`
	Allocatable   map[string]string `json:"allocatable"`
	Taints        []Taint           `json:"taints,omitempty"`
	Unschedulable bool              `json:"unschedulable,omitempty"`
}

type NodeSet struct {
	Node
	Count int `json:"count"`
}

type Taint struct {
	Key    string `json:"key"`
	Value  string `json:"value,omitempty"`
	Effect string `json:"effect"`
}

// Job is a Volcano job as its controller leaves it: a PodGroup named "<name>-<uid>" and pods
// named "<name>-<task>-<index>" (with Pods: PodsAfterEnqueue, once the PodGroup is enqueued).
type Job struct {
	Name          string            `json:"name"`
	Namespace     string            `json:"namespace,omitempty"`
	Queue         string            `json:"queue,omitempty"`
	MinMember     int32             `json:"minMember,omitempty"`
	MinResources  map[string]string `json:"minResources,omitempty"`
	Phase         string            `json:"phase,omitempty"` // PodGroup phase: Pending, Inqueue, Running
	PriorityClass string            `json:"priorityClass,omitempty"`
	// Pods says when the job's pods exist (cluster.go): PodsPresent ("", the default) from the
	// start; PodsAfterEnqueue once a cycle has moved the PodGroup out of Pending, as Volcano's job
	// controller creates a Volcano Job's pods.
	Pods  string `json:"pods,omitempty"`
	Tasks []Task `json:"tasks"`
}

// What Job.Pods says.
const (
	// PodsPresent: the pods exist from the start, whatever the PodGroup's phase (a job already
	// past enqueue, or a PodGroup made for pods that exist: a Deployment's, a pod's annotation).
	PodsPresent = "present"
	// PodsAfterEnqueue: a Volcano Job (vcjob). Its controller creates the pods only once the
	// PodGroup's phase is neither empty nor Pending (syncJob's syncTask); until then the scheduler
	// sees the PodGroup alone, so jobEnqueueable carries no tasks and a zero total request.
	PodsAfterEnqueue = "after-enqueue"
)

type Task struct {
	Name        string            `json:"name"`
	Replicas    int               `json:"replicas,omitempty"`
	Requests    map[string]string `json:"requests,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
	// ReplicaAnnotations adds annotations to replica i only (tasks of one role that differ).
	ReplicaAnnotations []map[string]string `json:"replicaAnnotations,omitempty"`
	Labels             map[string]string   `json:"labels,omitempty"`
	Tolerations        []Taint             `json:"tolerations,omitempty"`
	// Nodes places replica i on Nodes[i] (running); a replica without a node is pending.
	Nodes []string `json:"nodes,omitempty"`
	// Duration is how many cycles a replica runs before it succeeds (several cycles only;
	// 0: it runs for ever). A replica running at the start has run from cycle 1, a replica
	// bound in cycle N from cycle N+1.
	Duration int `json:"duration,omitempty"`
}

// Expect is the outcome case's expectations as written (policy-extender compares them; the
// harness reads only Why, to ask `policy-extender why` about those names, and Releases).
type Expect struct {
	Binds     map[string]string   `json:"binds"`
	Evictions []string            `json:"evictions"`
	Pipelined map[string]string   `json:"pipelined,omitempty"` // ns/pod -> node ("": not pipelined)
	Phases    map[string]string   `json:"phases,omitempty"`    // ns/job -> PodGroup phase
	Calls     map[string]CallSpec `json:"calls,omitempty"`     // verb -> how often Volcano calls it
	Why       map[string][]string `json:"why,omitempty"`       // "job ns/name" -> lines it must contain
	// Panic is a text that a panic of Volcano's code in the actions must contain (the scheduler
	// crashes); without it, any panic fails the scenario.
	Panic string `json:"panic,omitempty"`
	// Releases replaces, for the releases whose version starts with the key ("v1.10"), the
	// fields it sets: what an older Volcano does differently.
	Releases map[string]Expect `json:"releases,omitempty"`

	// Cycle is expect.cycle.N of a case of several cycles: the harness reads only its Why, to
	// ask `policy-extender why` about those names right after cycle N.
	Cycle map[int]Expect `json:"cycle,omitempty"`
}

// For is what to expect of a release: the scenario's expect with the release's replacements.
func (e Expect) For(release string) Expect {
	out := e
	for prefix, r := range e.Releases {
		if !strings.HasPrefix(release, prefix) {
			continue
		}
		if r.Binds != nil {
			out.Binds = r.Binds
		}
		if r.Evictions != nil {
			out.Evictions = r.Evictions
		}
		if r.Pipelined != nil {
			out.Pipelined = r.Pipelined
		}
		if r.Phases != nil {
			out.Phases = r.Phases
		}
		if r.Calls != nil {
			out.Calls = r.Calls
		}
		if r.Why != nil {
			out.Why = r.Why
		}
		if r.Panic != "" {
			out.Panic = r.Panic
		}
		if r.Cycle != nil {
			out.Cycle = r.Cycle
		}
	}
	return out
}

// CallSpec bounds how often Volcano calls a verb in the cycle.
type CallSpec struct {
	Min *int `json:"min,omitempty"`
	Max *int `json:"max,omitempty"`
}

// LoadScenarios reads every *.yaml of dir, sorted by name.
func LoadScenarios(dir string) ([]*Scenario, error) {
	return harness.LoadScenarios(dir, func(s *Scenario, file, name string) error {
		s.File, s.Name = file, name
		return s.validate()
	})
}

func (s *Scenario) validate() error {
	if len(s.Policies) == 0 && len(s.PolicyFiles) == 0 {
		return fmt.Errorf("no policies: a scenario serves at least one policy file")
	}
	if err := s.validateCycles(); err != nil {
		return err
	}
	for _, j := range s.Cluster.Jobs {
		if len(j.Tasks) == 0 {
			return fmt.Errorf("job %s has no tasks", j.Name)
		}
	}
	return nil
}

// AppliesTo says whether the scenario runs on a release ("v1.15.1").
func (s *Scenario) AppliesTo(release string) bool {
	return (s.Since == "" || compareVersions(release, s.Since) >= 0) &&
		(s.Before == "" || compareVersions(release, s.Before) < 0)
}

// compareVersions compares "v1.15.1" with "v1.13" numerically, part by part.
func compareVersions(a, b string) int {
	pa, pb := versionParts(a), versionParts(b)
	for i := 0; i < len(pb); i++ {
		var x int
		if i < len(pa) {
			x = pa[i]
		}
		if x != pb[i] {
			if x < pb[i] {
				return -1
			}
			return 1
		}
	}
	return 0
}

func versionParts(v string) []int {
	v = strings.TrimPrefix(v, "v")
	if i := strings.IndexAny(v, "-+"); i >= 0 {
		v = v[:i]
	}
	var parts []int
	for _, p := range strings.Split(v, ".") {
		n := 0
		fmt.Sscanf(p, "%d", &n)
		parts = append(parts, n)
	}
	return parts
}
