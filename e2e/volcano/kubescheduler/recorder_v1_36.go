//go:build kube_v1_36 || kube_v1_37

package main

// kube-scheduler v1.36 and later: the scheduler's recorder factory returns an EventRecorderLogger
// (pkg/scheduler/profile.RecorderFactory).

import "k8s.io/client-go/tools/events"

// recorderFactory gives scheduler.New the recorder the harness reads FailedScheduling from.
func recorderFactory(recorder *events.FakeRecorder) func(string) events.EventRecorderLogger {
	return func(string) events.EventRecorderLogger { return recorder }
}
