package harness

// The command line both harnesses take, klog's quieting and the report's common lines.

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"k8s.io/klog/v2"
)

// Flags are the command-line flags both harnesses take.
type Flags struct {
	Release   string
	Repo      string
	Scenarios string
	CLI       string
	Run       string
	Work      string
	Verbose   bool

	program     string // the command's name, which names its temporary directory
	scenarioDir string // the default of -scenarios, relative to -repo
}

// Define defines the common flags on the program's command line (flag.CommandLine): program
// is the command's name (e2e-volcano), scheduler the scheduler it runs (Volcano), scenarioDir
// the default scenario directory relative to the repository (slash-separated).
func (f *Flags) Define(program, scheduler, scenarioDir, repoHelp, verboseHelp string) {
	f.program, f.scenarioDir = program, scenarioDir
	flag.StringVar(&f.Release, "release", "", "the "+scheduler+" release this binary was built with (vX.Y.Z)")
	flag.StringVar(&f.Repo, "repo", ".", repoHelp)
	flag.StringVar(&f.Scenarios, "scenarios", "", "scenario directory (default REPO/"+scenarioDir+")")
	flag.StringVar(&f.CLI, "cli", "policy-extender", "the policy-extender command")
	flag.StringVar(&f.Run, "run", "", "only the scenarios whose name matches this regular expression")
	flag.StringVar(&f.Work, "work", "", "directory for the services' policies and logs (default: a temporary one)")
	flag.BoolVar(&f.Verbose, "verbose", false, verboseHelp)
}

// Command is -cli split into the command and its arguments.
func (f *Flags) Command() []string { return strings.Fields(f.CLI) }

// Filter is -run compiled, or nil when every scenario runs.
func (f *Flags) Filter() *regexp.Regexp {
	if f.Run == "" {
		return nil
	}
	return regexp.MustCompile(f.Run)
}

// SetDefaults fills -scenarios and -work (a fresh temporary directory named after the program)
// when they were not given. The returned function removes that temporary directory.
func (f *Flags) SetDefaults() (cleanup func(), err error) {
	if f.Scenarios == "" {
		f.Scenarios = filepath.Join(f.Repo, filepath.FromSlash(f.scenarioDir))
	}
	if f.Work != "" {
		return func() {}, nil
	}
	dir, err := os.MkdirTemp("", f.program+"-")
	if err != nil {
		return nil, err
	}
	f.Work = dir
	return func() { os.RemoveAll(dir) }, nil
}

// QuietKlog discards the scheduler's klog output, unless the environment variable envVar holds
// a verbosity: then klog writes at that level on standard error.
func QuietKlog(envVar string) {
	klogFlags := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(klogFlags)
	_ = klogFlags.Set("logtostderr", "false")
	if os.Getenv(envVar) == "" {
		klog.SetOutput(io.Discard)
	} else {
		_ = klogFlags.Set("logtostderr", "true")
		_ = klogFlags.Set("v", os.Getenv(envVar))
	}
}

// WriteHead writes the first lines of a scenario's report: PASS or FAIL with the scenario's
// name and, in parentheses, where it ran; then the error and each problem, indented.
func WriteHead(b *strings.Builder, ok bool, name, where string, err error, problems []string) {
	status := "PASS"
	if !ok {
		status = "FAIL"
	}
	fmt.Fprintf(b, "%s  %s (%s)\n", status, name, where)
	if err != nil {
		fmt.Fprintf(b, "      error: %v\n", err)
	}
	for _, p := range problems {
		fmt.Fprintf(b, "      %s\n", strings.ReplaceAll(p, "\n", "\n      "))
	}
}

// FormatCounts renders {"predicate": 12, ...} as "predicate 12, ..." sorted by verb.
func FormatCounts(counts map[string]int) string {
	var verbs []string
	for v := range counts {
		verbs = append(verbs, v)
	}
	sort.Strings(verbs)
	var parts []string
	for _, v := range verbs {
		parts = append(parts, fmt.Sprintf("%s %d", v, counts[v]))
	}
	return strings.Join(parts, ", ")
}
