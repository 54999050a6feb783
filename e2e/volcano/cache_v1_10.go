//go:build volcano_v1_10

package main

// The mock scheduler cache of Volcano v1.10 and v1.11: seven parameters (a volume binder).

import (
	"k8s.io/client-go/tools/record"

	"volcano.sh/volcano/cmd/scheduler/app/options"
	"volcano.sh/volcano/pkg/scheduler/api"
	"volcano.sh/volcano/pkg/scheduler/cache"
	"volcano.sh/volcano/pkg/scheduler/util"
)

func newCache(binder *util.FakeBinder, evictor *util.FakeEvictor, stop chan struct{}) *cache.SchedulerCache {
	// The scheduler's options with their flag defaults (minimum-feasible-nodes 100, ...), as
	// the mock cache of v1.12 and later sets them itself.
	options.Default()
	sc := cache.NewCustomMockSchedulerCache(schedulerName, binder, evictor, &statusUpdater{}, nil, nil, &record.FakeRecorder{})
	sc.Run(stop) // the goroutine that binds committed tasks, among others
	return sc
}

// statusUpdater is v1.10's fake, except that an updated PodGroup is given back as the API server
// would: the fake answers nil, which the cache stores as the job's PodGroup, losing its phase.
type statusUpdater struct{ util.FakeStatusUpdater }

func (statusUpdater) UpdatePodGroup(pg *api.PodGroup) (*api.PodGroup, error) { return pg, nil }
