//go:build kube_v1_37

package main

// kube-scheduler v1.37: as v1.36, and scheduler.NewInformerFactory takes the informers' name
// (nil: unnamed); NodeInfoLister gains HavePodsWithRequiredNonHostScopedAntiAffinityList (extender.go).

import (
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/events"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler"
)

type extender = fwk.Extender
type nodeInfo = fwk.NodeInfo

// recorderFactory gives scheduler.New the recorder the harness reads FailedScheduling from.
func recorderFactory(recorder *events.FakeRecorder) func(string) events.EventRecorderLogger {
	return func(string) events.EventRecorderLogger { return recorder }
}

// newInformerFactory is scheduler.NewInformerFactory with no resync and no informer name.
func newInformerFactory(client kubernetes.Interface) informers.SharedInformerFactory {
	return scheduler.NewInformerFactory(client, 0, nil)
}
