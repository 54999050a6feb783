package main

// A scenario is data: the policies, the extender entry of the KubeSchedulerConfiguration, the
// cluster, the pod to schedule and what kube-scheduler's code must get from the service.
// docs/e2e-kube-scheduler.md describes the format.

import (
	"fmt"
	"sort"

	"policy-extender/e2e/volcano/internal/harness"
)

// Scenario is one scenarios/*.yaml file.
type Scenario struct {
	Name        string `json:"-"`
	File        string `json:"-"`
	Description string `json:"description"`
	// Policies maps a file name to its text; PolicyFiles names files of the repository.
	Policies    map[string]string `json:"policies,omitempty"`
	PolicyFiles []string          `json:"policyFiles,omitempty"`
	// Extender overrides keys of the `extenders:` entry (KubeSchedulerConfiguration v1 keys:
	// filterVerb, ignorable, nodeCacheCapable, weight, ...; null removes one). The harness sets
	// urlPrefix; the entry goes through kube-scheduler's own config decoding and validation.
	Extender map[string]any `json:"extender,omitempty"`
	// Conf "generated": the entry is the one `policy-extender kube-scheduler-conf` prints for the
	// scenario's policies (--url the harness's proxy), Extender's keys over it.
	Conf    string  `json:"conf,omitempty"`
	Fault   *Fault  `json:"fault,omitempty"`
	Cluster Cluster `json:"cluster"`
	// Pod is the pod kube-scheduler schedules.
	Pod Pod `json:"pod"`
	// Victims names, per node, the pods kube-scheduler proposes to evict (default: every pod on
	// the node whose priority is lower than the pod's).
	Victims map[string][]string `json:"victims,omitempty"`
	// Volcano calls a Volcano verb of the same service with a raw body: the status it must answer.
	Volcano *VolcanoCall `json:"volcano,omitempty"`
	Expect  Expect       `json:"expect"`
}

// Fault makes the service fail as a deployment can.
type Fault struct {
	// Stop kills the service (every process) before kube-scheduler calls it.
	Stop bool `json:"stop,omitempty"`
	// Status answers every call of these verbs (filter, prioritize, preempt) with this HTTP
	// status instead of the service.
	Status map[string]int `json:"status,omitempty"`
}

// VolcanoCall is one call of a Volcano verb (the same serve answers both schedulers).
type VolcanoCall struct {
	Path string `json:"path"`
	// Body is the request, or BodyFile a file of the repository holding it (a captured one).
	Body     string `json:"body,omitempty"`
	BodyFile string `json:"bodyFile,omitempty"`
	Status   int    `json:"status"`
	// Contains are texts the reply's body must contain.
	Contains []string `json:"contains,omitempty"`
}

// Cluster is what the scheduler's informers hold.
type Cluster struct {
	Nodes []Node `json:"nodes"`
	// Pods are pods already running on a node (node is required).
	Pods []Pod `json:"pods,omitempty"`
}

type Node struct {
	Name          string            `json:"name"`
	Labels        map[string]string `json:"labels,omitempty"`
	Annotations   map[string]string `json:"annotations,omitempty"`
	Allocatable   map[string]string `json:"allocatable"`
	Taints        []Taint           `json:"taints,omitempty"`
	Unschedulable bool              `json:"unschedulable,omitempty"`
	// NotReady sets the Ready condition to "False" (default "True").
	NotReady bool `json:"notReady,omitempty"`
}

type Taint struct {
	Key    string `json:"key"`
	Value  string `json:"value,omitempty"`
	Effect string `json:"effect"`
}

type Toleration struct {
	Key      string `json:"key,omitempty"`
	Operator string `json:"operator,omitempty"`
	Value    string `json:"value,omitempty"`
	Effect   string `json:"effect,omitempty"`
}

type Pod struct {
	Name        string            `json:"name"`
	Namespace   string            `json:"namespace,omitempty"`
	UID         string            `json:"uid,omitempty"` // default: uid-<name>
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
	Priority    int32             `json:"priority,omitempty"`
	// PriorityClass is spec.priorityClassName (the priority itself is Priority, as the
	// admission plugin would have resolved it).
	PriorityClass string            `json:"priorityClass,omitempty"`
	Requests      map[string]string `json:"requests,omitempty"`
	Tolerations   []Toleration      `json:"tolerations,omitempty"`
	NodeSelector  map[string]string `json:"nodeSelector,omitempty"`
	// PreferNodes adds a preferred node affinity (weight 100) to nodes with these labels.
	PreferNodes map[string]string `json:"preferNodes,omitempty"`
	Node        string            `json:"node,omitempty"`
}

// Expect is what kube-scheduler's code must get. Each part is checked when given.
type Expect struct {
	// Filter, Prioritize and Preempt: the extender's own methods (HTTPExtender.Filter,
	// Prioritize, ProcessPreemption) called with every node of the cluster.
	Filter     *FilterExpect     `json:"filter,omitempty"`
	Prioritize *PrioritizeExpect `json:"prioritize,omitempty"`
	Preempt    *PreemptExpect    `json:"preempt,omitempty"`
	// Schedule: the scheduler's own scheduling cycle (scheduler.New with the extender,
	// ScheduleOne) on a fake clientset.
	Schedule *ScheduleExpect `json:"schedule,omitempty"`
	// Calls: how many calls of these verbs reached the service's side in all (0: none).
	Calls map[string]int `json:"calls,omitempty"`
}

type FilterExpect struct {
	Nodes        []string          `json:"nodes"`
	Failed       map[string]string `json:"failed,omitempty"`
	Unresolvable map[string]string `json:"unresolvable,omitempty"`
	// Error: the call must fail with an error containing this text (nothing else is checked).
	Error string `json:"error,omitempty"`
}

type PrioritizeExpect struct {
	Scores map[string]int64 `json:"scores"`
	Error  string           `json:"error,omitempty"`
}

type PreemptExpect struct {
	// Victims: node -> pod names, for exactly the nodes the reply keeps.
	Victims map[string][]string `json:"victims"`
	Error   string              `json:"error,omitempty"`
}

type ScheduleExpect struct {
	// Bind is the node the pod is bound to ("": not bound; "*": not checked, as when the bind
	// after a preemption is a later cycle's, which kube-scheduler's queue may hold back).
	Bind string `json:"bind,omitempty"`
	// Failed are texts the pod's FailedScheduling event must contain.
	Failed []string `json:"failed,omitempty"`
	// Preempted are the pods deleted by preemption; Nominated the pod's nominated node.
	Preempted []string `json:"preempted,omitempty"`
	Nominated string   `json:"nominated,omitempty"`
}

// LoadScenarios reads every *.yaml of dir, sorted by name.
func LoadScenarios(dir string) ([]*Scenario, error) {
	out, err := harness.LoadScenarios(dir, func(s *Scenario, file, name string) error {
		s.File, s.Name = file, name
		return s.validate()
	})
	if err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no scenarios (*.yaml)", dir)
	}
	return out, nil
}

func (s *Scenario) validate() error {
	if len(s.Policies) == 0 && len(s.PolicyFiles) == 0 {
		return fmt.Errorf("no policies: a scenario serves at least one policy file")
	}
	if s.Conf != "" && s.Conf != "generated" {
		return fmt.Errorf("conf: %q is not a choice: write generated, or leave it out for the harness's entry", s.Conf)
	}
	if s.Pod.Name == "" {
		return fmt.Errorf("pod.name is required: the pod kube-scheduler schedules")
	}
	e := s.Expect
	if e.Filter == nil && e.Prioritize == nil && e.Preempt == nil && e.Schedule == nil && e.Calls == nil && s.Volcano == nil {
		return fmt.Errorf("expect has nothing to check: give filter, prioritize, preempt or schedule")
	}
	if e.Preempt != nil {
		for _, names := range e.Preempt.Victims {
			sort.Strings(names)
		}
	}
	for _, p := range s.Cluster.Pods {
		if p.Node == "" {
			return fmt.Errorf("cluster pod %s has no node: cluster pods are running pods", p.Name)
		}
	}
	return nil
}
