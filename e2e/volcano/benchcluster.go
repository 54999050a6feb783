package main

// The cost benchmark's cluster: NODES nodes in three zones (every fourth a GPU node with 8 GPUs),
// PODS running pods on each, all belonging to running Volcano jobs of 10 tasks (pods as the job
// controller and the kubelet leave them: owner, labels, annotations, a projected service-account
// volume, tolerations, status with conditions and container statuses; no managedFields), and 10
// pending jobs of 4 tasks to place, each pinned to a zone by annotation (what the extender's
// zone rule reads) and by the same nodeSelector: so Volcano's own predicates plugin rejects the
// same nodes when the extender does not (variants a and b), every variant makes the same
// extender calls (Volcano's predicate error cache keeps a rejection by any plugin for the job's
// other tasks) and prioritizes the same nodes, and only the answers' cost differs.
//
// Every node's load differs a little (one pod per node requests 500m + 1m x node index), so the
// rules' scores have a single best node and Volcano's random pick among equal scores does not
// make two runs bind differently.

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	vcv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"
)

const (
	zoneLabel      = "topology.kubernetes.io/zone"
	zoneAnnotation = "scheduling.example.com/zone"
	protectedKey   = "scheduling.example.com/protected"
	gpuResource    = "nvidia.com/gpu"
	runningJobSize = 10
)

var (
	benchZones   = []string{"zone-a", "zone-b", "zone-c"}
	benchCreated = metav1.Date(2026, 11, 1, 8, 0, 0, 0, metav1.Now().Location())
)

func isGPUNode(i int) bool { return i%4 == 0 }

// BenchCluster builds the objects of one benchmark size.
func BenchCluster(nodes, podsPerNode int) *Objects {
	objs := &Objects{
		PriorityClasses: []*schedulingv1.PriorityClass{{ObjectMeta: metav1.ObjectMeta{Name: "batch"}, Value: 100}},
		Queues: []*vcv1beta1.Queue{{
			ObjectMeta: metav1.ObjectMeta{Name: "default", UID: types.UID(uid("queue/default"))},
			Spec:       vcv1beta1.QueueSpec{Weight: 1},
			Status:     vcv1beta1.QueueStatus{State: vcv1beta1.QueueStateOpen},
		}},
	}
	for i := 0; i < nodes; i++ {
		objs.Nodes = append(objs.Nodes, benchNode(i))
	}
	// Running pods: pod (node i, slot s) is task number i of the slot's row, so a running job's 10
	// tasks sit on 10 neighbouring nodes, as a spread job does.
	jobs := map[int]bool{}
	for s := 0; s < podsPerNode; s++ {
		for i := 0; i < nodes; i++ {
			seq := s*nodes + i
			job := seq / runningJobSize
			if !jobs[job] {
				jobs[job] = true
				objs.PodGroups = append(objs.PodGroups, benchPodGroup(fmt.Sprintf("train-%05d", job), benchNamespace(job),
					runningJobSize, vcv1beta1.PodGroupRunning, nil))
			}
			objs.Pods = append(objs.Pods, runningPod(job, seq%runningJobSize, i, s))
		}
	}
	// Pending: jobs 0-3 want one GPU per task, 4-9 two CPUs; each names a zone.
	for j := 0; j < 10; j++ {
		name, ns := fmt.Sprintf("pending-%02d", j), "team-new"
		requests := v1.ResourceList{v1.ResourceCPU: resource.MustParse("2"), v1.ResourceMemory: resource.MustParse("8Gi")}
		role := "worker"
		if j < 4 {
			requests = v1.ResourceList{v1.ResourceCPU: resource.MustParse("8"), v1.ResourceMemory: resource.MustParse("32Gi"),
				gpuResource: resource.MustParse("1")}
			role = "trainer"
		}
		min := v1.ResourceList{}
		for name, q := range requests {
			q = q.DeepCopy()
			q.Mul(4)
			min[name] = q
		}
		objs.PodGroups = append(objs.PodGroups, benchPodGroup(name, ns, 4, vcv1beta1.PodGroupPending, &min))
		for t := 0; t < 4; t++ {
			pod := benchPod(name, ns, role, t, requests, "")
			pod.Annotations[zoneAnnotation] = benchZones[j%3]
			pod.Spec.NodeSelector = map[string]string{zoneLabel: benchZones[j%3]}
			objs.Pods = append(objs.Pods, pod)
		}
	}
	return objs
}

func benchNamespace(job int) string { return fmt.Sprintf("team-%d", job%4) }

func benchNode(i int) *v1.Node {
	name := fmt.Sprintf("node-%04d", i)
	alloc := v1.ResourceList{v1.ResourceCPU: resource.MustParse("64"), v1.ResourceMemory: resource.MustParse("256Gi"),
		v1.ResourcePods: resource.MustParse("110"), v1.ResourceEphemeralStorage: resource.MustParse("400Gi")}
	labels := map[string]string{
		"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
		"node.kubernetes.io/instance-type": "m6i.16xlarge", zoneLabel: benchZones[i%3],
		"topology.kubernetes.io/region": "eu-west-1",
	}
	if isGPUNode(i) {
		alloc[v1.ResourceCPU] = resource.MustParse("96")
		alloc[v1.ResourceMemory] = resource.MustParse("768Gi")
		alloc[gpuResource] = resource.MustParse("8")
		labels["node.kubernetes.io/instance-type"] = "p4d.24xlarge"
		labels["nvidia.com/gpu.product"] = "NVIDIA-A100-SXM4-40GB"
	}
	return &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID(uid("node/" + name)), Labels: labels,
			Annotations: map[string]string{"node.alpha.kubernetes.io/ttl": "0",
				"volumes.kubernetes.io/controller-managed-attach-detach": "true"},
			CreationTimestamp: benchCreated},
		Spec: v1.NodeSpec{PodCIDR: fmt.Sprintf("10.%d.%d.0/24", 64+i/256, i%256),
			ProviderID: "aws:///eu-west-1a/i-0" + uid(name)[:16]},
		Status: v1.NodeStatus{Capacity: alloc, Allocatable: alloc,
			Conditions: []v1.NodeCondition{
				{Type: v1.NodeMemoryPressure, Status: v1.ConditionFalse, Reason: "KubeletHasSufficientMemory"},
				{Type: v1.NodeDiskPressure, Status: v1.ConditionFalse, Reason: "KubeletHasNoDiskPressure"},
				{Type: v1.NodePIDPressure, Status: v1.ConditionFalse, Reason: "KubeletHasSufficientPID"},
				{Type: v1.NodeReady, Status: v1.ConditionTrue, Reason: "KubeletReady"}},
			Addresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: fmt.Sprintf("10.0.%d.%d", i/256, i%256)},
				{Type: v1.NodeHostName, Address: name}},
			NodeInfo: v1.NodeSystemInfo{KubeletVersion: "v1.31.4", ContainerRuntimeVersion: "containerd://1.7.23",
				OSImage: "Ubuntu 22.04.5 LTS", KernelVersion: "6.8.0-1019-aws", OperatingSystem: "linux", Architecture: "amd64"},
		},
	}
}

func benchPodGroup(name, ns string, minMember int32, phase vcv1beta1.PodGroupPhase, min *v1.ResourceList) *vcv1beta1.PodGroup {
	pgName := name + "-" + uid(ns+"/"+name)
	return &vcv1beta1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Name: pgName, Namespace: ns, UID: types.UID(uid("pg/" + ns + "/" + pgName)),
			CreationTimestamp: benchCreated,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch.volcano.sh/v1alpha1", Kind: "Job", Name: name,
				UID: types.UID(uid(ns + "/" + name))}}},
		Spec:   vcv1beta1.PodGroupSpec{Queue: "default", MinMember: minMember, MinResources: min, PriorityClassName: "batch"},
		Status: vcv1beta1.PodGroupStatus{Phase: phase},
	}
}

// runningPod is task `index` of running job `job`, on node i.
func runningPod(job, index, node, slot int) *v1.Pod {
	cpus := []string{"250m", "500m", "1", "2"}
	requests := v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpus[slot%len(cpus)]),
		v1.ResourceMemory: resource.MustParse("4Gi")}
	if slot == 0 { // the per-node difference: no two nodes have the same load
		requests[v1.ResourceCPU] = *resource.NewMilliQuantity(int64(500+node), resource.DecimalSI)
	}
	if isGPUNode(node) && slot < (node/4)%8 { // GPU nodes run 0 to 7 one-GPU tasks
		requests[gpuResource] = resource.MustParse("1")
	}
	pod := benchPod(fmt.Sprintf("train-%05d", job), benchNamespace(job), "worker", index, requests, fmt.Sprintf("node-%04d", node))
	if (job+index)%7 == 0 {
		pod.Annotations[protectedKey] = "true"
	}
	return pod
}

// benchPod is a pod as Volcano's job controller creates it (bound to nodeName when not empty).
func benchPod(job, ns, role string, index int, requests v1.ResourceList, nodeName string) *v1.Pod {
	name := fmt.Sprintf("%s-%s-%d", job, role, index)
	pgName := job + "-" + uid(ns+"/"+job)
	limits := v1.ResourceList{}
	for k, q := range requests {
		if k != v1.ResourceCPU {
			limits[k] = q
		}
	}
	priority := int32(100)
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: types.UID(uid("pod/" + ns + "/" + name)),
			ResourceVersion: "48213377", CreationTimestamp: benchCreated,
			Labels: map[string]string{"volcano.sh/job-name": job, "volcano.sh/job-namespace": ns,
				"volcano.sh/queue-name": "default", "volcano.sh/task-spec": role, "app": job},
			Annotations: map[string]string{vcv1beta1.KubeGroupNameAnnotationKey: pgName,
				"volcano.sh/job-name": job, "volcano.sh/job-version": "0", "volcano.sh/queue-name": "default",
				"volcano.sh/task-spec": role, "volcano.sh/task-index": fmt.Sprint(index),
				"volcano.sh/template-uid": job + "-" + role},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch.volcano.sh/v1alpha1", Kind: "Job", Name: job,
				UID: types.UID(uid(ns + "/" + job)), Controller: ptr(true), BlockOwnerDeletion: ptr(true)}},
		},
		Spec: v1.PodSpec{
			SchedulerName: schedulerName, PriorityClassName: "batch", Priority: &priority,
			RestartPolicy: v1.RestartPolicyOnFailure, ServiceAccountName: "default", DNSPolicy: v1.DNSClusterFirst,
			Hostname: name, Subdomain: job, TerminationGracePeriodSeconds: ptr(int64(30)),
			Volumes: []v1.Volume{{Name: "kube-api-access-" + uid(name)[:5], VolumeSource: v1.VolumeSource{
				Projected: &v1.ProjectedVolumeSource{Sources: []v1.VolumeProjection{
					{ServiceAccountToken: &v1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: ptr(int64(3607))}},
					{ConfigMap: &v1.ConfigMapProjection{LocalObjectReference: v1.LocalObjectReference{Name: "kube-root-ca.crt"},
						Items: []v1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
				}, DefaultMode: ptr(int32(420))}}}},
			Containers: []v1.Container{{
				Name: role, Image: "registry.example.com/ml/trainer:2026.11.3",
				Command: []string{"python", "-m", "trainer", "--config", "/etc/job/config.yaml"},
				Env: []v1.EnvVar{{Name: "VC_TASK_INDEX", Value: fmt.Sprint(index)}, {Name: "VK_TASK_INDEX", Value: fmt.Sprint(index)},
					{Name: "VC_" + role + "_NUM", Value: "10"}},
				Resources: v1.ResourceRequirements{Requests: requests, Limits: limits},
				VolumeMounts: []v1.VolumeMount{{Name: "kube-api-access-" + uid(name)[:5], ReadOnly: true,
					MountPath: "/var/run/secrets/kubernetes.io/serviceaccount"}},
				TerminationMessagePath: "/dev/termination-log", TerminationMessagePolicy: v1.TerminationMessageReadFile,
				ImagePullPolicy: v1.PullIfNotPresent,
			}},
			Tolerations: []v1.Toleration{
				{Key: "node.kubernetes.io/not-ready", Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute, TolerationSeconds: ptr(int64(300))},
				{Key: "node.kubernetes.io/unreachable", Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute, TolerationSeconds: ptr(int64(300))}},
		},
		Status: v1.PodStatus{Phase: v1.PodPending, QOSClass: v1.PodQOSBurstable},
	}
	if nodeName != "" {
		pod.Spec.NodeName = nodeName
		started := metav1.NewTime(benchCreated.Add(90e9))
		pod.Status = v1.PodStatus{Phase: v1.PodRunning, QOSClass: v1.PodQOSBurstable, HostIP: "10.0.0.10",
			PodIP: "10.64.3.17", StartTime: &started,
			Conditions: []v1.PodCondition{
				{Type: v1.PodInitialized, Status: v1.ConditionTrue, LastTransitionTime: started},
				{Type: v1.PodReady, Status: v1.ConditionTrue, LastTransitionTime: started},
				{Type: v1.ContainersReady, Status: v1.ConditionTrue, LastTransitionTime: started},
				{Type: v1.PodScheduled, Status: v1.ConditionTrue, LastTransitionTime: benchCreated}},
			ContainerStatuses: []v1.ContainerStatus{{Name: role, Ready: true, Started: ptr(true),
				State:       v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: started}},
				Image:       "registry.example.com/ml/trainer:2026.11.3",
				ImageID:     "registry.example.com/ml/trainer@sha256:4b0c7324dc695549caff586218721934def740361d492e6aa64cfb658daec17e",
				ContainerID: "containerd://" + uid(name)}},
		}
	}
	return pod
}

func ptr[T any](v T) *T { return &v }
