package main

// The scenario's cluster as the real v1.Node and v1.Pod objects kube-scheduler sends.

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Objects are the scenario's objects.
type Objects struct {
	Nodes  []*v1.Node
	Pods   []*v1.Pod            // running pods
	PodsOn map[string][]*v1.Pod // node name -> its running pods
	Pod    *v1.Pod              // the pod to schedule
	byName map[string]*v1.Pod   // pod name -> pod (running and pending)
}

// BuildObjects makes the scenario's objects; a bad quantity is an error naming where.
func BuildObjects(s *Scenario) (*Objects, error) {
	objs := &Objects{PodsOn: map[string][]*v1.Pod{}, byName: map[string]*v1.Pod{}}
	for _, n := range s.Cluster.Nodes {
		node, err := buildNode(n)
		if err != nil {
			return nil, err
		}
		objs.Nodes = append(objs.Nodes, node)
	}
	for _, p := range s.Cluster.Pods {
		pod, err := buildPod(p)
		if err != nil {
			return nil, err
		}
		objs.Pods = append(objs.Pods, pod)
		objs.PodsOn[p.Node] = append(objs.PodsOn[p.Node], pod)
		objs.byName[p.Name] = pod
	}
	pod, err := buildPod(s.Pod)
	if err != nil {
		return nil, err
	}
	objs.Pod = pod
	objs.byName[pod.Name] = pod
	return objs, nil
}

func quantities(where string, m map[string]string) (v1.ResourceList, error) {
	out := v1.ResourceList{}
	for k, v := range m {
		q, err := resource.ParseQuantity(v)
		if err != nil {
			return nil, fmt.Errorf("%s: %s: %q is not a quantity: %w", where, k, v, err)
		}
		out[v1.ResourceName(k)] = q
	}
	return out, nil
}

func buildNode(n Node) (*v1.Node, error) {
	alloc, err := quantities("node "+n.Name+" allocatable", n.Allocatable)
	if err != nil {
		return nil, err
	}
	if _, ok := alloc[v1.ResourcePods]; !ok {
		alloc[v1.ResourcePods] = resource.MustParse("110")
	}
	ready := v1.ConditionTrue
	if n.NotReady {
		ready = v1.ConditionFalse
	}
	node := &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: n.Name, UID: types.UID("uid-" + n.Name), Labels: n.Labels, Annotations: n.Annotations},
		Spec:       v1.NodeSpec{Unschedulable: n.Unschedulable},
		Status: v1.NodeStatus{
			Capacity: alloc.DeepCopy(), Allocatable: alloc,
			Conditions: []v1.NodeCondition{{Type: v1.NodeReady, Status: ready}},
		},
	}
	if node.Labels == nil {
		node.Labels = map[string]string{}
	}
	node.Labels[v1.LabelHostname] = n.Name
	for _, t := range n.Taints {
		node.Spec.Taints = append(node.Spec.Taints, v1.Taint{Key: t.Key, Value: t.Value, Effect: v1.TaintEffect(t.Effect)})
	}
	return node, nil
}

func buildPod(p Pod) (*v1.Pod, error) {
	requests, err := quantities("pod "+p.Name+" requests", p.Requests)
	if err != nil {
		return nil, err
	}
	ns := p.Namespace
	if ns == "" {
		ns = "default"
	}
	uid := p.UID
	if uid == "" {
		uid = "uid-" + p.Name
	}
	priority := p.Priority
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: ns, UID: types.UID(uid), Labels: p.Labels, Annotations: p.Annotations},
		Spec: v1.PodSpec{
			Containers:        []v1.Container{{Name: "main", Image: "busybox", Resources: v1.ResourceRequirements{Requests: requests}}},
			Priority:          &priority,
			PriorityClassName: p.PriorityClass,
			NodeSelector:      p.NodeSelector,
			NodeName:          p.Node,
			SchedulerName:     v1.DefaultSchedulerName,
		},
	}
	for _, t := range p.Tolerations {
		pod.Spec.Tolerations = append(pod.Spec.Tolerations, v1.Toleration{Key: t.Key, Operator: v1.TolerationOperator(t.Operator), Value: t.Value, Effect: v1.TaintEffect(t.Effect)})
	}
	if len(p.PreferNodes) > 0 {
		var exprs []v1.NodeSelectorRequirement
		for k, v := range p.PreferNodes {
			exprs = append(exprs, v1.NodeSelectorRequirement{Key: k, Operator: v1.NodeSelectorOpIn, Values: []string{v}})
		}
		pod.Spec.Affinity = &v1.Affinity{NodeAffinity: &v1.NodeAffinity{
			PreferredDuringSchedulingIgnoredDuringExecution: []v1.PreferredSchedulingTerm{{Weight: 100, Preference: v1.NodeSelectorTerm{MatchExpressions: exprs}}},
		}}
	}
	if p.Node != "" {
		pod.Status.Phase = v1.PodRunning
	} else {
		pod.Status.Phase = v1.PodPending
	}
	return pod, nil
}

// Victims are the pods kube-scheduler proposes per node: the scenario's list, or every pod on
// the node with a lower priority than the pod's.
func (o *Objects) Victims(s *Scenario) (map[string][]*v1.Pod, error) {
	out := map[string][]*v1.Pod{}
	if s.Victims != nil {
		for node, names := range s.Victims {
			for _, name := range names {
				pod, ok := o.byName[name]
				if !ok || pod.Spec.NodeName != node {
					return nil, fmt.Errorf("victims: %s is not a pod on node %s", name, node)
				}
				out[node] = append(out[node], pod)
			}
		}
		return out, nil
	}
	for _, n := range o.Nodes {
		for _, p := range o.PodsOn[n.Name] {
			if *p.Spec.Priority < *o.Pod.Spec.Priority {
				out[n.Name] = append(out[n.Name], p)
			}
		}
	}
	return out, nil
}

// NameOfUID is the pod name of a UID ("" if none).
func (o *Objects) NameOfUID(uid types.UID) string {
	for name, p := range o.byName {
		if p.UID == uid {
			return name
		}
	}
	return ""
}
