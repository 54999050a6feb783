package main

// One scheduling cycle as Volcano's scheduler runs it (Scheduler.runOnce): the conf through
// Volcano's own loader, OpenSession (the extender's onSessionOpen upload among the plugins),
// every action's Execute, CloseSession; then what the fake binder and evictor saw.

import (
	"fmt"
	"os"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"

	"volcano.sh/volcano/pkg/scheduler"
	"volcano.sh/volcano/pkg/scheduler/api"
	"volcano.sh/volcano/pkg/scheduler/cache"
	"volcano.sh/volcano/pkg/scheduler/conf"
	"volcano.sh/volcano/pkg/scheduler/framework"
	"volcano.sh/volcano/pkg/scheduler/util"

	// Volcano's actions and plugins register themselves, as in the scheduler binary.
	_ "volcano.sh/volcano/pkg/scheduler/actions"
	_ "volcano.sh/volcano/pkg/scheduler/plugins"
)

const schedulerName = "volcano"

// Outcome is what one cycle did.
type Outcome struct {
	Binds     map[string]string // ns/pod -> node
	Evictions []string          // ns/pod
	Pipelined map[string]string // ns/pod -> node
	Phases    map[string]string // ns/job (the scenario's job name) -> PodGroup phase
	// PodGroupPhases is the phase of every PodGroup after the session, by ns/PodGroup name:
	// what the next cycle's PodGroup holds.
	PodGroupPhases map[string]string
	// PodStatuses are the statuses Volcano wrote to pods it could not bind (their PodScheduled
	// condition, a preemptor's nominated node), by ns/name.
	PodStatuses map[string]v1.PodStatus
	// Calls is how often Volcano called each verb in this cycle.
	Calls   map[string]int
	Elapsed time.Duration // OpenSession to CloseSession
	// Panic is the message of a panic in Volcano's code during the actions (the scheduler process
	// would crash there); the session is then not closed and no phase is read.
	Panic string
}

// LoadConf reads a scheduler conf with Volcano's loader and points its extender at url.
func LoadConf(file, actionsOverride, url string, overrides map[string]any) ([]framework.Action, []conf.Tier, []conf.Configuration, error) {
	text, err := os.ReadFile(file)
	if err != nil {
		return nil, nil, nil, err
	}
	actions, tiers, configurations, _, err := scheduler.UnmarshalSchedulerConf(string(text))
	if err != nil {
		return nil, nil, nil, fmt.Errorf("%s: %w", file, err)
	}
	if actionsOverride != "" {
		actions = nil
		for _, name := range strings.Split(actionsOverride, ",") {
			action, found := framework.GetAction(strings.TrimSpace(name))
			if !found {
				return nil, nil, nil, fmt.Errorf("actions: no action %q in this release", name)
			}
			actions = append(actions, action)
		}
	}
	if url == "" { // no extender at all: the plugin leaves the conf
		removeExtender(tiers)
		return actions, tiers, configurations, nil
	}
	found := false
	for i := range tiers {
		for j := range tiers[i].Plugins {
			plugin := &tiers[i].Plugins[j]
			if plugin.Name != "extender" {
				continue
			}
			found = true
			if plugin.Arguments == nil {
				plugin.Arguments = map[string]interface{}{}
			}
			plugin.Arguments["extender.urlPrefix"] = url
			for k, v := range overrides {
				if v == nil {
					delete(plugin.Arguments, k)
				} else {
					plugin.Arguments[k] = v
				}
			}
		}
	}
	if !found {
		return nil, nil, nil, fmt.Errorf("%s: no extender plugin in the tiers", file)
	}
	return actions, tiers, configurations, nil
}

func removeExtender(tiers []conf.Tier) {
	for i := range tiers {
		kept := tiers[i].Plugins[:0]
		for _, p := range tiers[i].Plugins {
			if p.Name != "extender" {
				kept = append(kept, p)
			}
		}
		tiers[i].Plugins = kept
	}
}

// RunCycle fills a mock scheduler cache with objs and runs one whole session.
func RunCycle(objs *Objects, actions []framework.Action, tiers []conf.Tier, configurations []conf.Configuration, jobNames map[string]string) (*Outcome, error) {
	sc, binder, evictor, statuses, stop := newFilledCache(objs)
	defer close(stop)

	conf.EnabledActionMap = map[string]bool{}
	for _, action := range actions {
		conf.EnabledActionMap[action.Name()] = true
	}
	start := time.Now()
	ssn := framework.OpenSession(sc, tiers, configurations)
	out := &Outcome{Pipelined: map[string]string{}, Phases: map[string]string{}, PodGroupPhases: map[string]string{}}
	out.Panic = runActions(ssn, actions)
	if out.Panic == "" { // a scheduler that panicked closes no session
		closeAndRead(ssn, out, jobNames)
		out.Elapsed = time.Since(start)
	}
	waitSettled(func() int { return binder.Length() + evictor.Length() })
	out.Binds = binder.Binds()
	out.Evictions = evictor.Evicts()
	out.PodStatuses = statuses.all()
	return out, nil
}

// closeAndRead closes the session as the scheduler does (which updates every PodGroup's
// status) and reads the pipelined tasks before and the PodGroup phases after.
func closeAndRead(ssn *framework.Session, out *Outcome, jobNames map[string]string) {
	jobs := ssn.Jobs
	for _, job := range jobs {
		for _, task := range job.TaskStatusIndex[api.Pipelined] {
			out.Pipelined[task.Namespace+"/"+task.Name] = task.NodeName
		}
	}
	framework.CloseSession(ssn)
	for _, job := range jobs {
		if job.PodGroup == nil {
			continue
		}
		name := job.Namespace + "/" + job.Name
		out.PodGroupPhases[name] = string(job.PodGroup.Status.Phase)
		if scenarioName, ok := jobNames[name]; ok {
			name = scenarioName
		}
		out.Phases[name] = string(job.PodGroup.Status.Phase)
	}
}

// runActions runs every action on the session and returns the message of a panic in one of
// them ("" if none), as the scheduler process would crash with.
func runActions(ssn *framework.Session, actions []framework.Action) (panicked string) {
	defer func() {
		if p := recover(); p != nil {
			panicked = fmt.Sprint(p)
		}
	}()
	for _, action := range actions {
		action.Execute(ssn)
	}
	return ""
}

// newFilledCache is a mock scheduler cache holding objs; close stop when done with it.
func newFilledCache(objs *Objects) (*cache.SchedulerCache, *util.FakeBinder, *util.FakeEvictor, *podStatusLog, chan struct{}) {
	binder := util.NewFakeBinder(100000)
	evictor := util.NewFakeEvictor(100000)
	stop := make(chan struct{})
	statuses := &podStatusLog{byPod: map[string]v1.PodStatus{}}
	sc := newCache(binder, evictor, statuses, stop)
	for _, n := range objs.Nodes {
		sc.AddOrUpdateNode(n)
	}
	for _, p := range objs.Pods {
		sc.AddPod(p)
	}
	for _, pg := range objs.PodGroups {
		sc.AddPodGroupV1beta1(pg)
	}
	for _, q := range objs.Queues {
		sc.AddQueueV1beta1(q)
	}
	for _, pc := range objs.PriorityClasses {
		sc.AddPriorityClass(pc)
	}
	return sc, binder, evictor, statuses, stop
}

// waitSettled waits until binds and evictions, which Volcano sends from goroutines, stop coming.
func waitSettled(count func() int) {
	last, since := count(), time.Now()
	for time.Since(since) < 300*time.Millisecond {
		time.Sleep(20 * time.Millisecond)
		if n := count(); n != last {
			last, since = n, time.Now()
		}
	}
}
