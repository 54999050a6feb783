//go:build kube_v1_34

package main

// kube-scheduler v1.34: NodeInfo is already an interface of k8s.io/kube-scheduler/framework, the
// Extender interface is still kubernetes' own.

import (
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/events"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler"
	"k8s.io/kubernetes/pkg/scheduler/framework"
)

type extender = framework.Extender
type nodeInfo = fwk.NodeInfo

// recorderFactory gives scheduler.New the recorder the harness reads FailedScheduling from.
func recorderFactory(recorder *events.FakeRecorder) func(string) events.EventRecorder {
	return func(string) events.EventRecorder { return recorder }
}

// newInformerFactory is scheduler.NewInformerFactory with no resync.
func newInformerFactory(client kubernetes.Interface) informers.SharedInformerFactory {
	return scheduler.NewInformerFactory(client, 0)
}
