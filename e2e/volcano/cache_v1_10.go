//go:build volcano_v1_10

package main

// The mock scheduler cache of Volcano v1.10 and v1.11: seven parameters (a volume binder), run
// as the scheduler runs it.

import (
	"sync"

	v1 "k8s.io/api/core/v1"

	"k8s.io/client-go/tools/record"

	"volcano.sh/volcano/cmd/scheduler/app/options"
	"volcano.sh/volcano/pkg/scheduler/api"
	"volcano.sh/volcano/pkg/scheduler/cache"
	"volcano.sh/volcano/pkg/scheduler/util"
)

var registerOptions sync.Once

func newCache(binder *util.FakeBinder, evictor *util.FakeEvictor, statuses *podStatusLog, stop chan struct{}) *cache.SchedulerCache {
	// The scheduler's command-line options with their defaults (minimum-feasible-nodes 100, ...),
	// which predicate reads (CalculateNumOfFeasibleNodesToFind): the scheduler binary registers
	// them at start, and the mock cache of v1.12 and later does it itself (options.Default());
	// v1.10's does not, and predicate then dereferences a nil ServerOpts.
	// v1.10's Default registers the flags on every call (no sync.Once): once here.
	registerOptions.Do(func() { options.Default() })
	sc := cache.NewCustomMockSchedulerCache(schedulerName, binder, evictor, &statusUpdater{statuses: statuses}, nil, nil, &record.FakeRecorder{})
	// Binds go through the cache's bind worker (processBindTask), which Run starts, as v1.10's
	// uthelper does.
	sc.Run(stop)
	return sc
}

// statusUpdater answers a PodGroup update with the PodGroup, as the API server does. v1.10's
// FakeStatusUpdater answers nil, and the session then sets each job's PodGroup to nil when it
// closes: no phase could be read.
// It keeps the pod statuses Volcano writes too (podStatusLog).
type statusUpdater struct {
	util.FakeStatusUpdater
	statuses *podStatusLog
}

func (*statusUpdater) UpdatePodGroup(pg *api.PodGroup) (*api.PodGroup, error) { return pg, nil }

func (u *statusUpdater) UpdatePodStatus(pod *v1.Pod) (*v1.Pod, error) {
	u.statuses.record(pod)
	return pod, nil
}
