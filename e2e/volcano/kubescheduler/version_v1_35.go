//go:build !kube_v1_34 && !kube_v1_30 && !kube_v1_36 && !kube_v1_37

package main

// kube-scheduler v1.35: the Extender and NodeInfo types live in k8s.io/kube-scheduler/framework.

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
func recorderFactory(recorder *events.FakeRecorder) func(string) events.EventRecorder {
	return func(string) events.EventRecorder { return recorder }
}

// newInformerFactory is scheduler.NewInformerFactory with no resync.
func newInformerFactory(client kubernetes.Interface) informers.SharedInformerFactory {
	return scheduler.NewInformerFactory(client, 0)
}
