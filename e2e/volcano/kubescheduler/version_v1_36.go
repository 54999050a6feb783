//go:build kube_v1_36

package main

// kube-scheduler v1.36: as v1.35, and the scheduler's recorder factory returns an
// EventRecorderLogger (pkg/scheduler/profile.RecorderFactory).

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

// newInformerFactory is scheduler.NewInformerFactory with no resync.
func newInformerFactory(client kubernetes.Interface) informers.SharedInformerFactory {
	return scheduler.NewInformerFactory(client, 0)
}
