package main

// The cluster of a recorded cycle: the body of Volcano's onSessionOpen call (what
// `policy-extender serve --record` keeps first in every cycle) turned back into the objects the
// scheduler cache is filled from. The body is Volcano's own JSON of its session snapshot: Jobs
// (each with its PodGroup and, per task, the whole Pod), Nodes (each with the Kubernetes Node
// and every pod on it, Volcano's or not) and Queues (each with the Queue). What it lacks is
// rebuilt: the PriorityClasses (from the priority Volcano resolved for each PodGroup and pod)
// and, in a recording redacted with `--record-redact annotations`, the annotations that tie a
// pod to its PodGroup and task (from the job and task they are listed under). Not rebuilt: the
// namespaces' resource quotas (NamespaceInfo), hypernodes and resource claims.

import (
	"encoding/json"
	"fmt"
	"os"

	v1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	vcv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"
)

type snapshotBody struct {
	Jobs   map[string]snapshotJob   `json:"Jobs"`
	Nodes  map[string]snapshotNode  `json:"Nodes"`
	Queues map[string]snapshotQueue `json:"Queues"`
}

type snapshotJob struct {
	UID       string                  `json:"UID"`
	Name      string                  `json:"Name"`
	Namespace string                  `json:"Namespace"`
	Priority  int32                   `json:"Priority"`
	PodGroup  json.RawMessage         `json:"PodGroup"`
	Tasks     map[string]snapshotTask `json:"Tasks"`
}

type snapshotTask struct {
	Name      string          `json:"Name"`
	Namespace string          `json:"Namespace"`
	TaskRole  string          `json:"TaskRole"`
	NodeName  string          `json:"NodeName"`
	Status    int             `json:"Status"`
	Pod       json.RawMessage `json:"Pod"`
}

type snapshotNode struct {
	Name  string                  `json:"Name"`
	Node  json.RawMessage         `json:"Node"`
	Tasks map[string]snapshotTask `json:"Tasks"`
}

type snapshotQueue struct {
	Name  string          `json:"Name"`
	Queue json.RawMessage `json:"Queue"`
}

// Volcano's TaskStatus values that mean the scheduler already chose the task's node.
const (
	taskBinding = 8
	taskBound   = 16
)

// LoadSnapshot reads an onSessionOpen body and returns the objects to fill the cache with and
// the name to report each PodGroup under (ns/PodGroup -> ns/job, from the job controller's
// volcano.sh/job-name label).
func LoadSnapshot(file string) (*Objects, map[string]string, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, nil, err
	}
	var body snapshotBody
	if err := json.Unmarshal(data, &body); err != nil {
		return nil, nil, fmt.Errorf("%s: not an onSessionOpen body of Volcano: %w", file, err)
	}
	if len(body.Nodes) == 0 {
		return nil, nil, fmt.Errorf("%s: the snapshot has no nodes (is it an onSessionOpen body?)", file)
	}
	objs := &Objects{}
	jobNames := map[string]string{}
	priorities := map[string]int32{}
	seen := map[string]bool{} // ns/name of the pods added

	for _, name := range sortedKeys(body.Nodes) {
		raw := body.Nodes[name].Node
		node := &v1.Node{}
		if err := decodeObject(raw, node, &node.ObjectMeta); err != nil {
			return nil, nil, fmt.Errorf("%s: node %s: %w", file, name, err)
		}
		objs.Nodes = append(objs.Nodes, node)
	}
	for _, key := range sortedKeys(body.Queues) {
		q := &vcv1beta1.Queue{}
		if err := decodeObject(body.Queues[key].Queue, q, &q.ObjectMeta); err != nil {
			return nil, nil, fmt.Errorf("%s: queue %s: %w", file, key, err)
		}
		if q.Name == "" {
			q.Name = body.Queues[key].Name
		}
		objs.Queues = append(objs.Queues, q)
	}
	for _, key := range sortedKeys(body.Jobs) {
		job := body.Jobs[key]
		var pg *vcv1beta1.PodGroup
		if len(job.PodGroup) > 0 && string(job.PodGroup) != "null" {
			pg = &vcv1beta1.PodGroup{}
			if err := decodeObject(job.PodGroup, pg, &pg.ObjectMeta); err != nil {
				return nil, nil, fmt.Errorf("%s: job %s: PodGroup: %w", file, key, err)
			}
			if pg.Namespace == "" {
				pg.Namespace = job.Namespace
			}
			objs.PodGroups = append(objs.PodGroups, pg)
			if pc := pg.Spec.PriorityClassName; pc != "" {
				priorities[pc] = job.Priority
			}
			shown := pg.Name
			if jobName := pg.Labels["volcano.sh/job-name"]; jobName != "" {
				shown = jobName
			}
			jobNames[pg.Namespace+"/"+pg.Name] = pg.Namespace + "/" + shown
		}
		for _, uid := range sortedKeys(job.Tasks) {
			pod, err := taskPod(job.Tasks[uid])
			if err != nil {
				return nil, nil, fmt.Errorf("%s: job %s: task %s: %w", file, key, uid, err)
			}
			if pod == nil || seen[pod.Namespace+"/"+pod.Name] {
				continue
			}
			if pg != nil { // what redaction blanks, the job's listing still says
				setIfEmpty(pod, vcv1beta1.KubeGroupNameAnnotationKey, pg.Name)
			}
			setIfEmpty(pod, "volcano.sh/task-spec", job.Tasks[uid].TaskRole)
			if key := pod.Namespace + "/" + pgName(pg); pg != nil && jobNames[key] == key {
				if jobName := pod.Labels["volcano.sh/job-name"]; jobName != "" { // the job controller's label
					jobNames[key] = pod.Namespace + "/" + jobName
				}
			}
			seen[pod.Namespace+"/"+pod.Name] = true
			objs.Pods = append(objs.Pods, pod)
		}
	}
	// Pods on the nodes that belong to no job of Volcano's (daemons, other schedulers' pods):
	// they hold the nodes' resources.
	for _, name := range sortedKeys(body.Nodes) {
		tasks := body.Nodes[name].Tasks
		for _, key := range sortedKeys(tasks) {
			pod, err := taskPod(tasks[key])
			if err != nil {
				return nil, nil, fmt.Errorf("%s: node %s: task %s: %w", file, name, key, err)
			}
			if pod == nil || seen[pod.Namespace+"/"+pod.Name] {
				continue
			}
			if pod.Spec.NodeName == "" {
				pod.Spec.NodeName = name
			}
			seen[pod.Namespace+"/"+pod.Name] = true
			objs.Pods = append(objs.Pods, pod)
		}
	}
	for _, pod := range objs.Pods {
		if pc := pod.Spec.PriorityClassName; pc != "" && pod.Spec.Priority != nil {
			if _, known := priorities[pc]; !known {
				priorities[pc] = *pod.Spec.Priority
			}
		}
	}
	for _, name := range sortedKeys(priorities) {
		objs.PriorityClasses = append(objs.PriorityClasses, &schedulingv1.PriorityClass{
			ObjectMeta: metav1.ObjectMeta{Name: name}, Value: priorities[name]})
	}
	return objs, jobNames, nil
}

// taskPod is the Pod of a snapshot task, with the node Volcano had chosen for it when the pod
// itself does not carry it yet (a bind under way).
func taskPod(t snapshotTask) (*v1.Pod, error) {
	if len(t.Pod) == 0 || string(t.Pod) == "null" {
		return nil, nil
	}
	pod := &v1.Pod{}
	if err := json.Unmarshal(t.Pod, pod); err != nil {
		return nil, err
	}
	if pod.Namespace == "" {
		pod.Namespace = t.Namespace
	}
	if pod.Name == "" {
		pod.Name = t.Name
	}
	if pod.Spec.NodeName == "" && t.NodeName != "" && (t.Status == taskBinding || t.Status == taskBound) {
		pod.Spec.NodeName = t.NodeName
	}
	return pod, nil
}

func pgName(pg *vcv1beta1.PodGroup) string {
	if pg == nil {
		return ""
	}
	return pg.Name
}

func setIfEmpty(pod *v1.Pod, key, value string) {
	if value == "" || pod.Annotations[key] != "" {
		return
	}
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	pod.Annotations[key] = value
}

// decodeObject decodes a Kubernetes or Volcano object. Volcano v1.10 to v1.13 send the
// PodGroup and the Queue as their internal API types without json tags: the metadata inline and
// the other fields under Go names ("Spec": {"MinMember": ...}), which encoding/json matches
// case-insensitively; so when there is no "metadata", the top level is the metadata.
func decodeObject(raw json.RawMessage, into any, meta *metav1.ObjectMeta) error {
	if len(raw) == 0 || string(raw) == "null" {
		return fmt.Errorf("missing")
	}
	if err := json.Unmarshal(raw, into); err != nil {
		return err
	}
	if meta.Name == "" {
		var inline metav1.ObjectMeta
		if err := json.Unmarshal(raw, &inline); err != nil {
			return err
		}
		if inline.Name != "" {
			*meta = inline
		}
	}
	if meta.Name == "" {
		return fmt.Errorf("no metadata.name")
	}
	return nil
}
