//go:build !volcano_v1_10 && !volcano_v1_12

package main

// The mock scheduler cache of Volcano v1.14 and later: six parameters, informers to start (v1.12
// and v1.13: cache_v1_12.go).

import (
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/tools/record"

	"volcano.sh/volcano/pkg/scheduler/cache"
	"volcano.sh/volcano/pkg/scheduler/metrics"
	"volcano.sh/volcano/pkg/scheduler/util"
)

// The kube-scheduler plugins Volcano's predicates plugin runs record metrics that the scheduler
// binary registers at start (as uthelper's init does).
func init() { metrics.InitKubeSchedulerRelatedMetrics() }

func newCache(binder *util.FakeBinder, evictor *util.FakeEvictor, statuses *podStatusLog, stop chan struct{}) *cache.SchedulerCache {
	// The fake Volcano clientset of the published volcano.sh/apis (v1.14.0, which v1.15.x is built
	// with here) predates watch-list support: with client-go's WatchListClient on, its informers
	// wait for a bookmark that never comes and the cache never syncs. The informers hold nothing
	// (objects go straight into the cache below), so turning it off changes nothing Volcano does.
	if err := utilfeature.DefaultMutableFeatureGate.Set("WatchListClient=false"); err != nil {
		panic(err)
	}
	sc := cache.NewCustomMockSchedulerCache(schedulerName, binder, evictor, &statusUpdater{statuses: statuses}, nil, &record.FakeRecorder{})
	sc.Run(stop)
	return sc
}
