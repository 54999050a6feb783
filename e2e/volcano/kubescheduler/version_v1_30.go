//go:build kube_v1_30

package main

// kube-scheduler v1.30: NodeInfo is a struct of kubernetes' scheduler framework.

import (
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/events"
	"k8s.io/kubernetes/pkg/scheduler"
	"k8s.io/kubernetes/pkg/scheduler/framework"
)

type extender = framework.Extender
type nodeInfo = *framework.NodeInfo

// recorderFactory gives scheduler.New the recorder the harness reads FailedScheduling from.
func recorderFactory(recorder *events.FakeRecorder) func(string) events.EventRecorder {
	return func(string) events.EventRecorder { return recorder }
}

// newInformerFactory is scheduler.NewInformerFactory with no resync.
func newInformerFactory(client kubernetes.Interface) informers.SharedInformerFactory {
	return scheduler.NewInformerFactory(client, 0)
}
