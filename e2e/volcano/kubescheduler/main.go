// Command e2e-kube-scheduler runs kube-scheduler's own code against a real policy-extender: for
// every scenario of scenarios/, kube-scheduler's HTTP extender client (NewHTTPExtender from an
// `extenders:` entry decoded and validated by kube-scheduler's config code) calls `policy-extender
// serve` on loopback for filter, prioritize and preempt, and kube-scheduler's scheduling loop
// (scheduler.New with the extender, on a fake clientset) schedules the scenario's pod. Built
// once per kube-scheduler release by scripts/e2e-kube-scheduler, in the module of e2e/volcano
// (each Volcano release's module graph holds one kubernetes release).
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"policy-extender/e2e/volcano/internal/harness"
)

func main() {
	var f harness.Flags
	f.Define("e2e-kube-scheduler", "kube-scheduler", "e2e/volcano/kubescheduler/scenarios",
		"the policy-extender repository", "print every scenario with every call and answer")
	flag.Parse()

	// E2E_KUBE_KLOG=N: kube-scheduler's log at level N on standard error.
	harness.QuietKlog("E2E_KUBE_KLOG")

	cleanup, err := f.SetDefaults()
	if err != nil {
		fatal(err)
	}
	defer cleanup()
	all, err := LoadScenarios(f.Scenarios)
	if err != nil {
		fatal(err)
	}
	filter := f.Filter()
	command := f.Command()
	total, passed := 0, 0
	verbs := map[string]int{}
	for _, s := range all {
		if filter != nil && !filter.MatchString(s.Name) {
			continue
		}
		total++
		result := RunScenario(s, f.Release, f.Repo, command, filepath.Join(f.Work, s.Name))
		if result.OK() {
			passed++
		}
		for _, c := range result.Calls {
			verbs[c.Verb]++
		}
		if f.Verbose || !result.OK() {
			fmt.Print(result.Format(f.Verbose))
		}
	}
	fmt.Printf("kube-scheduler %s: %d scenarios, %d passed\n", f.Release, total, passed)
	fmt.Printf("kube-scheduler %s: verbs called: %s\n", f.Release, formatCounts(verbs))
	if passed != total {
		os.Exit(1)
	}
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "e2e-kube-scheduler:", err)
	os.Exit(2)
}
