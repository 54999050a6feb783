package main

// kube-scheduler's own extender client against the service: the `extenders:` entry decoded and
// validated by kube-scheduler's config code, NewHTTPExtender built from it, and its Filter,
// Prioritize and ProcessPreemption called with the scenario's objects.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os/exec"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"
	"k8s.io/kubernetes/pkg/scheduler"
	schedulerapi "k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/apis/config/scheme"
	"k8s.io/kubernetes/pkg/scheduler/apis/config/validation"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"sigs.k8s.io/yaml"
)

// ExtenderConfig is the scenario's `extenders:` entry pointed at url, as kube-scheduler reads
// it from a KubeSchedulerConfiguration file: decoded (v1 defaults applied) and validated.
// base is the entry to start from (nil: the harness's defaults, every verb at url).
func ExtenderConfig(s *Scenario, url string, base map[string]any) (schedulerapi.Extender, string, error) {
	entry := base
	if entry == nil {
		entry = map[string]any{
			"urlPrefix": url, "filterVerb": "filter", "prioritizeVerb": "prioritize",
			"preemptVerb": "preempt", "weight": 1, "nodeCacheCapable": false, "enableHTTPS": false,
		}
	}
	for k, v := range s.Extender {
		if v == nil {
			delete(entry, k)
		} else {
			entry[k] = v
		}
	}
	doc := map[string]any{
		"apiVersion": "kubescheduler.config.k8s.io/v1",
		"kind":       "KubeSchedulerConfiguration",
		"extenders":  []any{entry},
	}
	text, err := yaml.Marshal(doc)
	if err != nil {
		return schedulerapi.Extender{}, "", err
	}
	obj, _, err := scheme.Codecs.UniversalDecoder().Decode(text, nil, nil)
	if err != nil {
		return schedulerapi.Extender{}, string(text), fmt.Errorf("kube-scheduler does not decode the extender entry: %w", err)
	}
	cfg, ok := obj.(*schedulerapi.KubeSchedulerConfiguration)
	if !ok {
		return schedulerapi.Extender{}, string(text), fmt.Errorf("decoded a %T, not a KubeSchedulerConfiguration", obj)
	}
	if errs := validation.ValidateKubeSchedulerConfiguration(cfg); errs != nil {
		return schedulerapi.Extender{}, string(text), fmt.Errorf("kube-scheduler refuses the configuration: %w", errs)
	}
	return cfg.Extenders[0], string(text), nil
}

// GeneratedEntry is the `extenders:` entry `policy-extender kube-scheduler-conf` prints for the
// policies of policyDir, kube-scheduler reaching the service at url.
func GeneratedEntry(command []string, policyDir, url string) (map[string]any, string, error) {
	args := append(append([]string{}, command[1:]...), "kube-scheduler-conf", policyDir, "--url", url)
	cmd := exec.Command(command[0], args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, string(out), fmt.Errorf("policy-extender kube-scheduler-conf: %w\n%s", err, stderr.String())
	}
	var doc struct {
		Extenders []map[string]any `json:"extenders"`
	}
	if err := yaml.Unmarshal(out, &doc); err != nil {
		return nil, string(out), fmt.Errorf("kube-scheduler-conf printed no YAML: %w", err)
	}
	if len(doc.Extenders) != 1 {
		return nil, string(out), fmt.Errorf("kube-scheduler-conf printed %d extenders entries, want 1", len(doc.Extenders))
	}
	return doc.Extenders[0], string(out), nil
}

// newNodeInfos are the scheduler's NodeInfos of the nodes, holding their running pods.
func newNodeInfos(objs *Objects) []nodeInfo {
	var out []nodeInfo
	for _, n := range objs.Nodes {
		ni := framework.NewNodeInfo(objs.PodsOn[n.Name]...)
		ni.SetNode(n)
		out = append(out, ni)
	}
	return out
}

// lister is the NodeInfoLister ProcessPreemption resolves the reply's UIDs with (the
// scheduler's snapshot in a real cycle).
type lister struct{ infos []nodeInfo }

func (l lister) List() ([]nodeInfo, error)                                 { return l.infos, nil }
func (l lister) HavePodsWithAffinityList() ([]nodeInfo, error)             { return nil, nil }
func (l lister) HavePodsWithRequiredAntiAffinityList() ([]nodeInfo, error) { return nil, nil }

// HavePodsWithRequiredNonHostScopedAntiAffinityList is v1.37's (its NodeInfoLister): no such pods here.
func (l lister) HavePodsWithRequiredNonHostScopedAntiAffinityList() ([]nodeInfo, error) {
	return nil, nil
}
func (l lister) Get(name string) (nodeInfo, error) {
	for _, ni := range l.infos {
		if ni.Node().Name == name {
			return ni, nil
		}
	}
	return nil, fmt.Errorf("nodeinfo not found for node name %q", name)
}

// NewExtender is kube-scheduler's HTTPExtender built from cfg.
func NewExtender(cfg schedulerapi.Extender) (extender, error) {
	return scheduler.NewHTTPExtender(&cfg)
}

// FilterResult is what HTTPExtender.Filter returned.
type FilterResult struct {
	Nodes        []string
	Failed       map[string]string
	Unresolvable map[string]string
	Err          error
}

// CallFilter calls the extender's Filter with every node and checks what kube-scheduler's
// findNodesThatPassExtenders relies on: the nodes kept are input nodes, each once, and (our
// contract) every input node is answered exactly once, kept or failed.
func CallFilter(ext extender, objs *Objects) (FilterResult, []string) {
	kept, failed, unresolvable, err := ext.Filter(objs.Pod, newNodeInfos(objs))
	r := FilterResult{Failed: failed, Unresolvable: unresolvable, Err: err}
	if err != nil {
		return r, nil
	}
	var problems []string
	seen := map[string]string{}
	input := map[string]bool{}
	for _, n := range objs.Nodes {
		input[n.Name] = true
	}
	answer := func(name, where string) {
		if !input[name] {
			problems = append(problems, fmt.Sprintf("filter: %s names node %q, which kube-scheduler did not send", where, name))
		}
		if prev, dup := seen[name]; dup {
			problems = append(problems, fmt.Sprintf("filter: node %q is in %s and in %s", name, prev, where))
		}
		seen[name] = where
	}
	var altered []string
	for _, ni := range kept {
		r.Nodes = append(r.Nodes, ni.Node().Name)
		answer(ni.Node().Name, "Nodes")
		if d := sameNode(ni.Node(), objs); d != "" {
			altered = append(altered, d)
		}
	}
	if len(altered) > 0 {
		problems = append(problems, fmt.Sprintf("filter: Nodes.items are not the nodes kube-scheduler sent (%s): "+
			"HTTPExtender.Filter makes the NodeInfos of the rest of the cycle from them, so its score plugins and "+
			"the extender's prioritize see these objects", strings.Join(altered, "; ")))
	}
	for name := range failed {
		answer(name, "FailedNodes")
	}
	for name := range unresolvable {
		answer(name, "FailedAndUnresolvableNodes")
	}
	for name := range input {
		if _, ok := seen[name]; !ok {
			problems = append(problems, fmt.Sprintf("filter: node %q is in none of Nodes, FailedNodes, FailedAndUnresolvableNodes", name))
		}
	}
	sort.Strings(r.Nodes)
	return r, problems
}

// sameNode says how a node of the filter reply differs from the node kube-scheduler sent (""
// if it is the same): HTTPExtender.Filter makes the NodeInfos of the rest of the cycle from the
// reply's Nodes.items (NodeInfo.SetNode(&result.Nodes.Items[i])), so the in-tree score plugins
// and the extender's own prioritize then see the reply's objects, not the cluster's.
func sameNode(got *v1.Node, objs *Objects) string {
	for _, sent := range objs.Nodes {
		if sent.Name != got.Name {
			continue
		}
		data, _ := json.Marshal(sent)
		var wire v1.Node
		_ = json.Unmarshal(data, &wire)
		if apiequality.Semantic.DeepEqual(&wire, got) {
			return ""
		}
		return fmt.Sprintf("%s has %d labels and %d allocatable resources, sent with %d and %d",
			got.Name, len(got.Labels), len(got.Status.Allocatable), len(sent.Labels), len(sent.Status.Allocatable))
	}
	return ""
}

// CallPrioritize calls the extender's Prioritize with every node; each node must get one score
// in 0..MaxExtenderPriority (kube-scheduler multiplies it by weight × 10 unchecked).
func CallPrioritize(ext extender, objs *Objects) (map[string]int64, int64, error, []string) {
	list, weight, err := ext.Prioritize(objs.Pod, newNodeInfos(objs))
	if err != nil {
		return nil, 0, err, nil
	}
	var problems []string
	scores := map[string]int64{}
	input := map[string]bool{}
	for _, n := range objs.Nodes {
		input[n.Name] = true
	}
	for _, hp := range *list {
		if !input[hp.Host] {
			problems = append(problems, fmt.Sprintf("prioritize: a score for node %q, which kube-scheduler did not send", hp.Host))
		}
		if _, dup := scores[hp.Host]; dup {
			problems = append(problems, fmt.Sprintf("prioritize: node %q scored twice", hp.Host))
		}
		if hp.Score < 0 || hp.Score > extenderv1.MaxExtenderPriority {
			problems = append(problems, fmt.Sprintf("prioritize: node %q scored %d, outside 0..%d", hp.Host, hp.Score, extenderv1.MaxExtenderPriority))
		}
		scores[hp.Host] = hp.Score
	}
	for name := range input {
		if _, ok := scores[name]; !ok {
			problems = append(problems, fmt.Sprintf("prioritize: no score for node %q", name))
		}
	}
	return scores, weight, nil, problems
}

// CallPreempt calls the extender's ProcessPreemption with the proposed victims; kube-scheduler's
// own convertPodUIDToPod resolves each returned UID among the node's pods. The reply must keep
// only proposed nodes, each with victims it was offered (a node with none is an error in the
// preemption evaluator).
func CallPreempt(ext extender, objs *Objects, proposed map[string][]*v1.Pod) (map[string][]string, error, []string) {
	args := map[string]*extenderv1.Victims{}
	for node, pods := range proposed {
		args[node] = &extenderv1.Victims{Pods: pods, NumPDBViolations: 0}
	}
	result, err := ext.ProcessPreemption(objs.Pod, args, lister{newNodeInfos(objs)})
	if err != nil {
		return nil, err, nil
	}
	var problems []string
	out := map[string][]string{}
	for node, victims := range result {
		offered := map[string]bool{}
		for _, p := range proposed[node] {
			offered[string(p.UID)] = true
		}
		if _, ok := proposed[node]; !ok {
			problems = append(problems, fmt.Sprintf("preempt: node %q was not proposed", node))
		}
		if len(victims.Pods) == 0 {
			problems = append(problems, fmt.Sprintf("preempt: node %q returned with no victims", node))
		}
		names := []string{}
		for _, p := range victims.Pods {
			if !offered[string(p.UID)] {
				problems = append(problems, fmt.Sprintf("preempt: node %q: pod %s was not a proposed victim", node, p.Name))
			}
			names = append(names, p.Name)
		}
		sort.Strings(names)
		out[node] = names
	}
	return out, nil, problems
}

// compact is a call's JSON on one line, cut for a report.
func compact(data []byte) string {
	var v any
	if json.Unmarshal(data, &v) == nil {
		if b, err := json.Marshal(v); err == nil {
			data = b
		}
	}
	if len(data) > 600 {
		return string(data[:600]) + "..."
	}
	return string(data)
}
