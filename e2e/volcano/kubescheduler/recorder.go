//go:build !kube_v1_36 && !kube_v1_37

package main

import "k8s.io/client-go/tools/events"

// recorderFactory gives scheduler.New the recorder the harness reads FailedScheduling from.
func recorderFactory(recorder *events.FakeRecorder) func(string) events.EventRecorder {
	return func(string) events.EventRecorder { return recorder }
}
