//go:build volcano_v1_10

package main

// The mock scheduler cache of Volcano v1.10 and v1.11: seven parameters (a volume binder).

import (
	"k8s.io/client-go/tools/record"

	"volcano.sh/volcano/pkg/scheduler/cache"
	"volcano.sh/volcano/pkg/scheduler/util"
)

func newCache(binder *util.FakeBinder, evictor *util.FakeEvictor, stop chan struct{}) *cache.SchedulerCache {
	return cache.NewCustomMockSchedulerCache(schedulerName, binder, evictor, &util.FakeStatusUpdater{}, nil, nil, &record.FakeRecorder{})
}
