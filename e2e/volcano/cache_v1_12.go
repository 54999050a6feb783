//go:build volcano_v1_12

package main

// The mock scheduler cache of Volcano v1.12 and v1.13: six parameters, informers to start, and
// no scheduler options of its own. The predicates plugin reads the scheduler's command-line
// options (options.ServerOpts.EnableCSIStorage, when it sets up volume binding), which the
// scheduler binary registers at start; v1.15's mock cache registers them itself (options.Default()),
// v1.12's and v1.13's do not, and predicates then dereferences a nil ServerOpts. Default registers
// the flags on every call: once here.

import (
	"sync"

	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/tools/record"

	"volcano.sh/volcano/cmd/scheduler/app/options"
	"volcano.sh/volcano/pkg/scheduler/cache"
	"volcano.sh/volcano/pkg/scheduler/metrics"
	"volcano.sh/volcano/pkg/scheduler/util"
)

var registerOptions sync.Once

// The kube-scheduler plugins Volcano's predicates plugin runs record metrics that the scheduler
// binary registers at start (as uthelper's init does).
func init() { metrics.InitKubeSchedulerRelatedMetrics() }

func newCache(binder *util.FakeBinder, evictor *util.FakeEvictor, statuses *podStatusLog, stop chan struct{}) *cache.SchedulerCache {
	registerOptions.Do(func() { options.Default() })
	// As for v1.14 and later (cache_v1_14.go): the informers hold nothing, and with client-go's
	// WatchListClient on the fake clientset's informers never sync.
	if err := utilfeature.DefaultMutableFeatureGate.Set("WatchListClient=false"); err != nil {
		panic(err)
	}
	sc := cache.NewCustomMockSchedulerCache(schedulerName, binder, evictor, &statusUpdater{statuses: statuses}, nil, &record.FakeRecorder{})
	sc.Run(stop)
	return sc
}
