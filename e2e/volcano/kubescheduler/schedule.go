package main

// kube-scheduler's own scheduling loop in process: scheduler.New with the default profile and
// the scenario's extender (WithExtenders, as kube-scheduler builds it from its configuration),
// informers over a fake clientset holding the scenario's nodes and pods, and Scheduler.Run, the
// loop kube-scheduler runs (ScheduleOne: the in-tree filters, the extender's filter, the score
// plugins and the extender's prioritize, the DefaultPreemption post-filter calling the
// extender's preempt, then the binding cycle). What the clientset sees is the outcome: the
// binding, the FailedScheduling event, the pods deleted by preemption, the nominated node.

import (
	"context"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/events"
	"k8s.io/kubernetes/pkg/scheduler"
	schedulerapi "k8s.io/kubernetes/pkg/scheduler/apis/config"
)

// ScheduleOutcome is what kube-scheduler did with the pod.
type ScheduleOutcome struct {
	Bind      string   // the node the pod was bound to ("" if not)
	Failed    []string // the pod's FailedScheduling event messages
	Preempted []string // pods deleted by preemption
	Nominated string   // the pod's status.nominatedNodeName at the end
}

type recorded struct {
	mu sync.Mutex
	ScheduleOutcome
}

// RunScheduler runs kube-scheduler's loop until want is met (or a bind happens, or limit
// passes), then stops it.
func RunScheduler(objs *Objects, cfg schedulerapi.Extender, want *ScheduleExpect, limit time.Duration) (*ScheduleOutcome, error) {
	var initial []runtime.Object
	for _, n := range objs.Nodes {
		initial = append(initial, n.DeepCopy())
	}
	for _, p := range objs.Pods {
		initial = append(initial, p.DeepCopy())
	}
	initial = append(initial, objs.Pod.DeepCopy())
	client := fake.NewSimpleClientset(initial...)
	out := &recorded{}
	client.PrependReactor("create", "pods", func(action clienttesting.Action) (bool, runtime.Object, error) {
		if action.GetSubresource() != "binding" {
			return false, nil, nil
		}
		binding := action.(clienttesting.CreateAction).GetObject().(*v1.Binding)
		out.mu.Lock()
		out.Bind = binding.Target.Name
		out.mu.Unlock()
		return true, binding, nil
	})
	client.PrependReactor("delete", "pods", func(action clienttesting.Action) (bool, runtime.Object, error) {
		out.mu.Lock()
		if name := action.(clienttesting.DeleteAction).GetName(); !contains(out.Preempted, name) {
			out.Preempted = append(out.Preempted, name) // a victim deleted again is the same victim
		}
		out.mu.Unlock()
		return false, nil, nil // the tracker deletes it; the informers see it go
	})

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	recorder := events.NewFakeRecorder(1000)
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case e := <-recorder.Events:
				if strings.HasPrefix(e, "Warning FailedScheduling ") {
					out.mu.Lock()
					out.Failed = append(out.Failed, strings.TrimPrefix(e, "Warning FailedScheduling "))
					out.mu.Unlock()
				}
			}
		}
	}()
	informerFactory := newInformerFactory(client)
	sched, err := scheduler.New(ctx, client, informerFactory, nil,
		recorderFactory(recorder),
		scheduler.WithExtenders(cfg),
		scheduler.WithPodInitialBackoffSeconds(1), scheduler.WithPodMaxBackoffSeconds(1))
	if err != nil {
		return nil, err
	}
	informerFactory.Start(ctx.Done())
	informerFactory.WaitForCacheSync(ctx.Done())
	done := make(chan struct{})
	go func() { sched.Run(ctx); close(done) }()

	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
		out.mu.Lock()
		finished := out.Bind != "" || (want != nil && (want.Bind == "" || want.Bind == "*") && satisfied(&out.ScheduleOutcome, want))
		out.mu.Unlock()
		if finished {
			time.Sleep(300 * time.Millisecond) // what follows at once (an event after a bind) is part of it
			break
		}
	}
	cancel()
	<-done
	pod, err := client.CoreV1().Pods(objs.Pod.Namespace).Get(context.Background(), objs.Pod.Name, metav1.GetOptions{})
	out.mu.Lock()
	defer out.mu.Unlock()
	if err == nil {
		out.Nominated = pod.Status.NominatedNodeName
	}
	result := out.ScheduleOutcome
	return &result, nil
}

// satisfied says whether the outcome so far holds every text and deletion want names.
func satisfied(got *ScheduleOutcome, want *ScheduleExpect) bool {
	if len(want.Failed) == 0 && len(want.Preempted) == 0 {
		return false
	}
	for _, text := range want.Failed {
		if !anyContains(got.Failed, text) {
			return false
		}
	}
	for _, name := range want.Preempted {
		if !contains(got.Preempted, name) {
			return false
		}
	}
	return true
}

func anyContains(list []string, text string) bool {
	for _, s := range list {
		if strings.Contains(s, text) {
			return true
		}
	}
	return false
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
