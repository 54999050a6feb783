package main

// Kubernetes and Volcano objects built from a scenario's cluster, shaped as a real cluster has
// them: the job controller's PodGroup names (with the job's UID) and pod names and annotations.

import (
	"crypto/sha1"
	"fmt"

	v1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	vcv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"
)

// Objects is what the scheduler cache is filled with.
type Objects struct {
	Nodes           []*v1.Node
	Pods            []*v1.Pod
	PodGroups       []*vcv1beta1.PodGroup
	Queues          []*vcv1beta1.Queue
	PriorityClasses []*schedulingv1.PriorityClass
	// Unborn are the pods a job controller has not created yet, by the ns/name of their
	// PodGroup: a Volcano Job's (pods: after-enqueue) while its PodGroup is Pending. No cache
	// holds them; cycles.go creates them once a cycle has enqueued the PodGroup.
	Unborn map[string][]*v1.Pod
}

// uid is a stable UID of the form Kubernetes gives, made from a name.
func uid(name string) string {
	h := sha1.Sum([]byte(name))
	return fmt.Sprintf("%x-%x-%x-%x-%x", h[0:4], h[4:6], h[6:8], h[8:10], h[10:16])
}

// PodGroupName is the name Volcano's job controller gives a job's PodGroup: "<job>-<job uid>".
func PodGroupName(j Job) string {
	return j.Name + "-" + uid(namespaceOf(j)+"/"+j.Name)
}

func namespaceOf(j Job) string {
	if j.Namespace == "" {
		return "default"
	}
	return j.Namespace
}

func resources(in map[string]string) (v1.ResourceList, error) {
	out := v1.ResourceList{}
	for name, q := range in {
		quantity, err := resource.ParseQuantity(q)
		if err != nil {
			return nil, fmt.Errorf("resource %s: %q: %w", name, q, err)
		}
		out[v1.ResourceName(name)] = quantity
	}
	return out, nil
}

func taints(in []Taint) []v1.Taint {
	var out []v1.Taint
	for _, t := range in {
		out = append(out, v1.Taint{Key: t.Key, Value: t.Value, Effect: v1.TaintEffect(t.Effect)})
	}
	return out
}

func tolerations(in []Taint) []v1.Toleration {
	var out []v1.Toleration
	for _, t := range in {
		op := v1.TolerationOpEqual
		if t.Value == "" {
			op = v1.TolerationOpExists
		}
		out = append(out, v1.Toleration{Key: t.Key, Operator: op, Value: t.Value, Effect: v1.TaintEffect(t.Effect)})
	}
	return out
}

// Build turns a scenario's cluster into objects.
func (c Cluster) Build() (*Objects, error) {
	objs := &Objects{}
	for name, value := range c.PriorityClasses {
		objs.PriorityClasses = append(objs.PriorityClasses, &schedulingv1.PriorityClass{
			ObjectMeta: metav1.ObjectMeta{Name: name}, Value: value})
	}
	if err := c.buildQueues(objs); err != nil {
		return nil, err
	}
	nodes := append([]Node{}, c.Nodes...)
	for _, set := range c.NodeSets {
		for i := 0; i < set.Count; i++ {
			n := set.Node
			n.Name = fmt.Sprintf("%s-%04d", set.Name, i)
			n.Labels = map[string]string{"e2e.policy-extender/index": fmt.Sprint(i)}
			for k, v := range set.Labels {
				n.Labels[k] = v
			}
			nodes = append(nodes, n)
		}
	}
	for _, n := range nodes {
		node, err := buildNode(n)
		if err != nil {
			return nil, err
		}
		objs.Nodes = append(objs.Nodes, node)
	}
	for _, j := range c.Jobs {
		if err := c.buildJob(objs, j); err != nil {
			return nil, fmt.Errorf("job %s: %w", j.Name, err)
		}
	}
	return objs, nil
}

func buildNode(n Node) (*v1.Node, error) {
	alloc, err := resources(n.Allocatable)
	if err != nil {
		return nil, fmt.Errorf("node %s: %w", n.Name, err)
	}
	return &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: n.Name, UID: types.UID(uid("node/" + n.Name)), Labels: n.Labels,
			Annotations: map[string]string{}},
		Spec: v1.NodeSpec{Taints: taints(n.Taints), Unschedulable: n.Unschedulable},
		Status: v1.NodeStatus{Capacity: alloc, Allocatable: alloc,
			Conditions: []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue}}},
	}, nil
}

func (c Cluster) buildQueues(objs *Objects) error {
	queues := c.Queues
	if len(queues) == 0 {
		queues = []Queue{{Name: "default", Weight: 1}}
	}
	for _, q := range queues {
		capability, err := resources(q.Capability)
		if err != nil {
			return fmt.Errorf("queue %s: %w", q.Name, err)
		}
		if len(capability) == 0 {
			capability = nil
		}
		weight := q.Weight
		if weight == 0 {
			weight = 1
		}
		objs.Queues = append(objs.Queues, &vcv1beta1.Queue{
			ObjectMeta: metav1.ObjectMeta{Name: q.Name, UID: types.UID(uid("queue/" + q.Name))},
			Spec:       vcv1beta1.QueueSpec{Weight: weight, Capability: capability, Reclaimable: q.Reclaimable},
			Status:     vcv1beta1.QueueStatus{State: vcv1beta1.QueueStateOpen},
		})
	}
	return nil
}

func (c Cluster) buildJob(objs *Objects, j Job) error {
	ns, pgName := namespaceOf(j), PodGroupName(j)
	queue := j.Queue
	if queue == "" {
		queue = "default"
	}
	minResources, err := resources(j.MinResources)
	if err != nil {
		return err
	}
	var priority *int32
	if j.PriorityClass != "" {
		value, ok := c.PriorityClasses[j.PriorityClass]
		if !ok {
			return fmt.Errorf("priority class %s is not in cluster.priorityClasses", j.PriorityClass)
		}
		priority = &value
	}
	afterEnqueue, err := podsAfterEnqueue(j)
	if err != nil {
		return err
	}
	phase := vcv1beta1.PodGroupPhase(j.Phase)
	switch {
	case phase == "" && afterEnqueue:
		phase = vcv1beta1.PodGroupPending // a Volcano Job as submitted
	case phase == "":
		phase = vcv1beta1.PodGroupInqueue
	}
	pg := &vcv1beta1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Name: pgName, Namespace: ns, UID: types.UID(uid("pg/" + ns + "/" + pgName))},
		Spec: vcv1beta1.PodGroupSpec{Queue: queue, MinMember: j.MinMember,
			PriorityClassName: j.PriorityClass},
		Status: vcv1beta1.PodGroupStatus{Phase: phase},
	}
	if len(minResources) > 0 {
		pg.Spec.MinResources = &minResources
	}
	objs.PodGroups = append(objs.PodGroups, pg)
	for _, t := range j.Tasks {
		requests, err := resources(t.Requests)
		if err != nil {
			return fmt.Errorf("task %s: %w", t.Name, err)
		}
		replicas := t.Replicas
		if replicas == 0 {
			replicas = 1
		}
		for i := 0; i < replicas; i++ {
			pod := buildPod(j, t, i, ns, pgName, requests, priority)
			if afterEnqueue {
				if objs.Unborn == nil {
					objs.Unborn = map[string][]*v1.Pod{}
				}
				objs.Unborn[ns+"/"+pgName] = append(objs.Unborn[ns+"/"+pgName], pod)
				continue
			}
			objs.Pods = append(objs.Pods, pod)
		}
	}
	return nil
}

// podsAfterEnqueue says whether the job's pods wait for its PodGroup to be enqueued (Job.Pods),
// or what is wrong with the job for that.
func podsAfterEnqueue(j Job) (bool, error) {
	switch j.Pods {
	case "", PodsPresent:
		return false, nil
	case PodsAfterEnqueue:
	default:
		return false, fmt.Errorf("pods: %q: write %s (the default: the pods exist from the start) or %s "+
			"(a Volcano Job: its controller creates them once the PodGroup is enqueued)", j.Pods, PodsPresent, PodsAfterEnqueue)
	}
	if j.Phase != "" && j.Phase != string(vcv1beta1.PodGroupPending) {
		return false, fmt.Errorf("pods: %s with phase: %s: the controller creates the pods of a PodGroup that is "+
			"not Pending at once; drop phase (Pending) or pods", PodsAfterEnqueue, j.Phase)
	}
	if len(j.MinResources) == 0 {
		return false, fmt.Errorf("pods: %s without minResources: Volcano's job controller always sets the PodGroup's "+
			"minResources (the requests of its minAvailable pods), and without them enqueue asks no plugin; write them", PodsAfterEnqueue)
	}
	for _, t := range j.Tasks {
		for _, node := range t.Nodes {
			if node != "" {
				return false, fmt.Errorf("task %s: pods: %s with nodes: a pod not created yet runs nowhere; drop nodes or pods", t.Name, PodsAfterEnqueue)
			}
		}
	}
	return true, nil
}

func buildPod(j Job, t Task, index int, ns, pgName string, requests v1.ResourceList, priority *int32) *v1.Pod {
	name := fmt.Sprintf("%s-%s-%d", j.Name, t.Name, index)
	annotations := map[string]string{
		vcv1beta1.KubeGroupNameAnnotationKey: pgName,
		"volcano.sh/job-name":                j.Name,
		"volcano.sh/task-spec":               t.Name,
	}
	for k, v := range t.Annotations {
		annotations[k] = v
	}
	if index < len(t.ReplicaAnnotations) {
		for k, v := range t.ReplicaAnnotations[index] {
			annotations[k] = v
		}
	}
	labels := map[string]string{"volcano.sh/job-name": j.Name, "volcano.sh/task-spec": t.Name}
	for k, v := range t.Labels {
		labels[k] = v
	}
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: types.UID(uid("pod/" + ns + "/" + name)),
			Labels: labels, Annotations: annotations},
		Spec: v1.PodSpec{
			SchedulerName:     "volcano",
			PriorityClassName: j.PriorityClass,
			Priority:          priority,
			Tolerations:       tolerations(t.Tolerations),
			Containers: []v1.Container{{Name: "main", Image: "busybox",
				Resources: v1.ResourceRequirements{Requests: requests, Limits: limitsOf(requests)}}},
		},
		Status: v1.PodStatus{Phase: v1.PodPending},
	}
	if index < len(t.Nodes) && t.Nodes[index] != "" {
		pod.Spec.NodeName = t.Nodes[index]
		pod.Status.Phase = v1.PodRunning
	}
	return pod
}

// limitsOf is what a user writes for extended resources: limits equal to requests (Kubernetes
// requires it for GPUs).
func limitsOf(requests v1.ResourceList) v1.ResourceList {
	limits := v1.ResourceList{}
	for name, q := range requests {
		if name != v1.ResourceCPU && name != v1.ResourceMemory {
			limits[name] = q
		}
	}
	if len(limits) == 0 {
		return nil
	}
	return limits
}
