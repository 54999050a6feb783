package main

// Several cycles: the cluster between two of Volcano's sessions, as the API server and the
// kubelets leave it. Each cycle fills a fresh mock cache with the cluster as it is then (what
// the scheduler's informers would hold once the cluster settled) and runs the whole session
// against the same policy-extender service, whose session store lives on across the cycles.
//
// Between cycle N and N+1, in this order:
//   - a pod bound in cycle N runs (spec.nodeName set, phase Running) from cycle N+1;
//   - a pod evicted in cycle N is terminating (a deletionTimestamp: Volcano's Releasing, its
//     resources still held but counted as coming free) for evictionGrace cycles, then gone;
//   - a pod with a duration succeeds once it has run that many cycles (Volcano frees its node);
//   - every PodGroup keeps the phase Volcano's CloseSession gave it, and a pod it could not
//     bind the status it wrote (PodScheduled false, a preemptor's nominated node);
//   - the job controller creates the pods of a Volcano Job (pods: after-enqueue) whose PodGroup
//     cycle N moved out of Pending: they are in cycle N+1's cache (until then the scheduler sees
//     the PodGroup alone, as in a cluster);
//   - the events of cycle N+1 happen (jobs arrive, nodes come, go with their pods, are
//     cordoned, pods are deleted).
// An evicted pod does not come back: a job controller's restart is an event (addJobs).

import (
	"fmt"
	"sort"
	"sync"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	vcv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"
)

// CycleCount is how many cycles the scenario runs.
func (s *Scenario) CycleCount() int {
	if s.Cycles < 1 {
		return 1
	}
	return s.Cycles
}

func (s *Scenario) grace() int {
	if s.EvictionGrace == nil {
		return 1
	}
	return *s.EvictionGrace
}

func (s *Scenario) validateCycles() error {
	n := s.CycleCount()
	if s.EvictionGrace != nil && *s.EvictionGrace < 0 {
		return fmt.Errorf("evictionGrace: %d: write 0 or more cycles", *s.EvictionGrace)
	}
	for i, e := range s.Events {
		if e.Before < 2 || e.Before > n {
			return fmt.Errorf("events[%d].before: %d: an event happens before cycle 2 to %d (cycles: %d)", i, e.Before, n, n)
		}
		for _, j := range e.AddJobs {
			if len(j.Tasks) == 0 {
				return fmt.Errorf("events[%d]: job %s has no tasks", i, j.Name)
			}
		}
	}
	return nil
}

// podLife is what the model knows of a pod beyond its object.
type podLife struct {
	duration     int // cycles it runs before it succeeds (0: for ever)
	runningSince int // first cycle it runs in (0: not running)
	evictedIn    int // the cycle that evicted it (0: none)
}

// podStatusLog keeps the pod statuses Volcano writes through its status updater (the API
// server in a cluster): what a pod's next cycle carries.
type podStatusLog struct {
	mu    sync.Mutex
	byPod map[string]v1.PodStatus
}

func (l *podStatusLog) record(pod *v1.Pod) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.byPod[pod.Namespace+"/"+pod.Name] = *pod.Status.DeepCopy()
}

func (l *podStatusLog) all() map[string]v1.PodStatus {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[string]v1.PodStatus, len(l.byPod))
	for k, v := range l.byPod {
		out[k] = v
	}
	return out
}

// clusterState is the cluster between cycles.
type clusterState struct {
	scenario *Scenario
	objs     *Objects
	life     map[string]*podLife // ns/name
}

func newClusterState(s *Scenario) (*clusterState, error) {
	objs, err := s.Cluster.Build()
	if err != nil {
		return nil, err
	}
	st := &clusterState{scenario: s, objs: objs, life: map[string]*podLife{}}
	st.noteJobs(s.Cluster.Jobs, 1)
	return st, nil
}

// noteJobs records the durations of jobs' replicas; running ones have run since cycle.
func (st *clusterState) noteJobs(jobs []Job, cycle int) {
	for _, j := range jobs {
		for _, t := range j.Tasks {
			replicas := t.Replicas
			if replicas == 0 {
				replicas = 1
			}
			for i := 0; i < replicas; i++ {
				life := &podLife{duration: t.Duration}
				if i < len(t.Nodes) && t.Nodes[i] != "" {
					life.runningSince = cycle
				}
				st.life[fmt.Sprintf("%s/%s-%s-%d", namespaceOf(j), j.Name, t.Name, i)] = life
			}
		}
	}
}

// Objects is a deep copy of the cluster for one cycle's cache (Volcano's cache may write to
// the objects it is given).
func (st *clusterState) Objects() *Objects {
	out := &Objects{}
	for _, n := range st.objs.Nodes {
		out.Nodes = append(out.Nodes, n.DeepCopy())
	}
	for _, p := range st.objs.Pods {
		out.Pods = append(out.Pods, p.DeepCopy())
	}
	for _, pg := range st.objs.PodGroups {
		out.PodGroups = append(out.PodGroups, pg.DeepCopy())
	}
	for _, q := range st.objs.Queues {
		out.Queues = append(out.Queues, q.DeepCopy())
	}
	for _, pc := range st.objs.PriorityClasses {
		out.PriorityClasses = append(out.PriorityClasses, pc.DeepCopy())
	}
	return out
}

func (st *clusterState) pod(key string) *v1.Pod {
	for _, p := range st.objs.Pods {
		if p.Namespace+"/"+p.Name == key {
			return p
		}
	}
	return nil
}

func (st *clusterState) lifeOf(key string) *podLife {
	if st.life[key] == nil {
		st.life[key] = &podLife{}
	}
	return st.life[key]
}

// Apply writes cycle's outcome into the cluster: binds run from the next cycle, evictions
// start terminating, pods Volcano could not bind keep the status it wrote (PodScheduled false,
// a preemptor's nominated node), PodGroups keep the phase the session gave them.
func (st *clusterState) Apply(out *Outcome, cycle int) {
	for key, node := range out.Binds {
		p := st.pod(key)
		if p == nil || p.DeletionTimestamp != nil {
			continue
		}
		p.Spec.NodeName = node
		p.Status.Phase = v1.PodRunning
		st.lifeOf(key).runningSince = cycle + 1
	}
	for _, key := range out.Evictions {
		p := st.pod(key)
		if p == nil || p.DeletionTimestamp != nil {
			continue
		}
		now := metav1.Now()
		p.DeletionTimestamp = &now
		st.lifeOf(key).evictedIn = cycle
	}
	for key, status := range out.PodStatuses {
		// What Volcano wrote of a pod it did not bind: its conditions and nominated node.
		if p := st.pod(key); p != nil && p.Spec.NodeName == "" && out.Binds[key] == "" {
			p.Status.Conditions = status.Conditions
			if status.NominatedNodeName != "" {
				p.Status.NominatedNodeName = status.NominatedNodeName
			}
		}
	}
	for _, pg := range st.objs.PodGroups {
		if phase, ok := out.PodGroupPhases[pg.Namespace+"/"+pg.Name]; ok && phase != "" {
			pg.Status.Phase = vcv1beta1.PodGroupPhase(phase)
		}
	}
	st.createPods()
}

// createPods is Volcano's job controller reacting to the phases the session wrote: the pods of a
// Volcano Job (pods: after-enqueue) are created once its PodGroup's phase is neither empty nor
// Pending (syncJob's syncTask), before the next cycle's session opens.
func (st *clusterState) createPods() {
	for _, pg := range st.objs.PodGroups {
		key := pg.Namespace + "/" + pg.Name
		pods, waiting := st.objs.Unborn[key]
		if !waiting || pg.Status.Phase == "" || pg.Status.Phase == vcv1beta1.PodGroupPending {
			continue
		}
		st.objs.Pods = append(st.objs.Pods, pods...)
		delete(st.objs.Unborn, key)
	}
}

// Advance moves the cluster to the start of cycle next: evicted pods past their grace are
// gone, pods that ran their duration succeed, then next's events happen.
func (st *clusterState) Advance(next int) error {
	grace := st.scenario.grace()
	kept := st.objs.Pods[:0]
	for _, p := range st.objs.Pods {
		key := p.Namespace + "/" + p.Name
		life := st.lifeOf(key)
		if life.evictedIn > 0 && next > life.evictedIn+grace {
			delete(st.life, key)
			continue
		}
		if life.duration > 0 && life.runningSince > 0 && p.DeletionTimestamp == nil &&
			p.Status.Phase == v1.PodRunning && next-life.runningSince >= life.duration {
			p.Status.Phase = v1.PodSucceeded
		}
		kept = append(kept, p)
	}
	st.objs.Pods = kept
	for i, e := range st.scenario.Events {
		if e.Before != next {
			continue
		}
		if err := st.happen(e); err != nil {
			return fmt.Errorf("events[%d] (before cycle %d): %w", i, next, err)
		}
	}
	return nil
}

func (st *clusterState) happen(e Event) error {
	for _, n := range e.AddNodes {
		node, err := buildNode(n)
		if err != nil {
			return err
		}
		st.objs.Nodes = append(st.objs.Nodes, node)
	}
	for _, name := range e.RemoveNodes {
		kept := st.objs.Nodes[:0]
		for _, n := range st.objs.Nodes {
			if n.Name != name {
				kept = append(kept, n)
			}
		}
		if len(kept) == len(st.objs.Nodes) {
			return fmt.Errorf("removeNodes: no node %s", name)
		}
		st.objs.Nodes = kept
		// The pods bound there go with it, as the pod garbage collector deletes them.
		pods := st.objs.Pods[:0]
		for _, p := range st.objs.Pods {
			if p.Spec.NodeName == name {
				delete(st.life, p.Namespace+"/"+p.Name)
				continue
			}
			pods = append(pods, p)
		}
		st.objs.Pods = pods
	}
	for _, name := range e.Cordon {
		if err := st.setUnschedulable(name, true); err != nil {
			return fmt.Errorf("cordon: %w", err)
		}
	}
	for _, name := range e.Uncordon {
		if err := st.setUnschedulable(name, false); err != nil {
			return fmt.Errorf("uncordon: %w", err)
		}
	}
	for _, key := range e.DeletePods {
		kept := st.objs.Pods[:0]
		for _, p := range st.objs.Pods {
			if p.Namespace+"/"+p.Name != key {
				kept = append(kept, p)
			}
		}
		if len(kept) == len(st.objs.Pods) {
			return fmt.Errorf("deletePods: no pod %s", key)
		}
		st.objs.Pods = kept
		delete(st.life, key)
	}
	for _, j := range e.AddJobs {
		if err := st.scenario.Cluster.buildJob(st.objs, j); err != nil {
			return fmt.Errorf("addJobs: job %s: %w", j.Name, err)
		}
	}
	st.noteJobs(e.AddJobs, 0)
	return nil
}

func (st *clusterState) setUnschedulable(name string, unschedulable bool) error {
	for _, n := range st.objs.Nodes {
		if n.Name == name {
			n.Spec.Unschedulable = unschedulable
			return nil
		}
	}
	return fmt.Errorf("no node %s", name)
}

// allJobs is every job of the scenario, at the start and added by events.
func (s *Scenario) allJobs() []Job {
	jobs := append([]Job{}, s.Cluster.Jobs...)
	for _, e := range s.Events {
		jobs = append(jobs, e.AddJobs...)
	}
	return jobs
}

// runOutcome is the whole run seen as one outcome: every cycle's binds (a pod's last) and
// evictions, the last cycle's pipelined tasks and phases.
func runOutcome(cycles []*Outcome) *Outcome {
	if len(cycles) == 1 {
		return cycles[0]
	}
	out := &Outcome{Binds: map[string]string{}, Pipelined: map[string]string{}, Phases: map[string]string{}}
	for _, c := range cycles {
		for pod, node := range c.Binds {
			out.Binds[pod] = node
		}
		out.Evictions = append(out.Evictions, c.Evictions...)
		out.Elapsed += c.Elapsed
		if c.Panic != "" {
			out.Panic = c.Panic
		}
	}
	last := cycles[len(cycles)-1]
	out.Pipelined, out.Phases, out.PodGroupPhases = last.Pipelined, last.Phases, last.PodGroupPhases
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
