//go:build !volcano_v1_10

package main

// The status updater of the mock cache from v1.12 on (cache_v1_12.go, cache_v1_14.go): the fake's,
// keeping the pod statuses Volcano writes. v1.10's gives the PodGroup back too (cache_v1_10.go).

import (
	v1 "k8s.io/api/core/v1"

	"volcano.sh/volcano/pkg/scheduler/util"
)

// statusUpdater keeps the pod statuses Volcano writes (podStatusLog).
type statusUpdater struct {
	util.FakeStatusUpdater
	statuses *podStatusLog
}

func (u *statusUpdater) UpdatePodStatus(pod *v1.Pod) (*v1.Pod, error) {
	u.statuses.record(pod)
	return pod, nil
}
