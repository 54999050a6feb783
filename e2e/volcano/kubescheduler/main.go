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
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"k8s.io/klog/v2"
)

func main() {
	release := flag.String("release", "", "the kube-scheduler release this binary was built with (vX.Y.Z)")
	repo := flag.String("repo", ".", "the policy-extender repository")
	scenarios := flag.String("scenarios", "", "scenario directory (default REPO/e2e/volcano/kubescheduler/scenarios)")
	cli := flag.String("cli", "policy-extender", "the policy-extender command")
	run := flag.String("run", "", "only the scenarios whose name matches this regular expression")
	work := flag.String("work", "", "directory for the services' policies and logs (default: a temporary one)")
	verbose := flag.Bool("verbose", false, "print every scenario with every call and answer")
	flag.Parse()

	klogFlags := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(klogFlags)
	_ = klogFlags.Set("logtostderr", "false")
	if os.Getenv("E2E_KUBE_KLOG") == "" { // E2E_KUBE_KLOG=N: kube-scheduler's log at level N on standard error
		klog.SetOutput(io.Discard)
	} else {
		_ = klogFlags.Set("logtostderr", "true")
		_ = klogFlags.Set("v", os.Getenv("E2E_KUBE_KLOG"))
	}

	if *scenarios == "" {
		*scenarios = filepath.Join(*repo, "e2e", "volcano", "kubescheduler", "scenarios")
	}
	if *work == "" {
		dir, err := os.MkdirTemp("", "e2e-kube-scheduler-")
		if err != nil {
			fatal(err)
		}
		defer os.RemoveAll(dir)
		*work = dir
	}
	all, err := LoadScenarios(*scenarios)
	if err != nil {
		fatal(err)
	}
	var filter *regexp.Regexp
	if *run != "" {
		filter = regexp.MustCompile(*run)
	}
	command := strings.Fields(*cli)
	total, passed := 0, 0
	verbs := map[string]int{}
	for _, s := range all {
		if filter != nil && !filter.MatchString(s.Name) {
			continue
		}
		total++
		result := RunScenario(s, *release, *repo, command, filepath.Join(*work, s.Name))
		if result.OK() {
			passed++
		}
		for _, c := range result.Calls {
			verbs[c.Verb]++
		}
		if *verbose || !result.OK() {
			fmt.Print(result.Format(*verbose))
		}
	}
	fmt.Printf("kube-scheduler %s: %d scenarios, %d passed\n", *release, total, passed)
	fmt.Printf("kube-scheduler %s: verbs called: %s\n", *release, formatCounts(verbs))
	if passed != total {
		os.Exit(1)
	}
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "e2e-kube-scheduler:", err)
	os.Exit(2)
}
