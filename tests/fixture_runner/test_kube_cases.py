"""``protocol: kube-scheduler`` cases: compact input built into the bodies kube-scheduler sends,
answered by the service's kube-scheduler verbs, expectations on kube-scheduler's answers, and
coverage per scheduler."""

import json

from policy_extender.fixture_runner import kube
from policy_extender.fixture_runner.coverage import render
from policy_extender.fixture_runner.loader import load_file
from policy_extender.fixture_runner.outcome_run import OutcomeSettings
from policy_extender.fixture_runner.runner import run_paths

from tests.support.fixture_dirs import REPO, write_policy_dir

BOTH = """\
protocol volcano, kube-scheduler
filter same-zone: node.labels.zone == task.annotations.zone
    reason "node zone {node.labels.zone} is not {task.annotations.zone}"
    unresolvable
filter not-cordoned: not node.unschedulable
score gpus: node.allocatable.gpu
    normalize 0 to 10
victim lower: evictee.priority < evictor.priority
    reason "{evictee.name} is not of lower priority"
"""

CASES = """\
defaults:
  protocol: kube-scheduler
  decision: filter
cases:
  - name: a node of the zone is kept
    input:
      task: &web {name: web-0, annotations: {zone: a}}
      node: {name: n1, labels: {zone: a}}
    expect: {fits: true}
  - name: another zone is unresolvable
    input:
      task: *web
      node: {name: n2, labels: {zone: b}}
    expect: {fits: false, unresolvable: true, rule: same-zone, reason: "node zone b is not a"}
  - name: a cordoned node may be freed by preemption
    input:
      task: *web
      node: {name: n3, labels: {zone: a}, unschedulable: true}
    expect: {fits: false, unresolvable: false, rule: not-cordoned}
  - name: scores are 0..10 integers
    decision: prioritize
    input:
      task: *web
      nodes:
        - {name: small, labels: {zone: a}, allocatable: {gpu: 2}}
        - {name: mid, labels: {zone: a}, allocatable: {gpu: 3}}
        - {name: big, labels: {zone: a}, allocatable: {gpu: 6}}
    expect: {scores: {small: 0, mid: 3, big: 10}, order: [big, mid, small]}
  - name: only lower-priority pods are victims, named by name or UID
    decision: preempt
    input:
      evictor: {name: urgent-0, priority: 100}
      evictees:
        - {name: batch-0, uid: u-batch-0, priority: 10, node_name: n1}
        - {name: peer-0, uid: u-peer-0, priority: 100, node_name: n1}
        - {name: batch-1, uid: u-batch-1, priority: 10, node_name: n2}
    expect: {victims: [batch-0, u-batch-1]}
  - name: a node with no victim left is dropped
    decision: preemptable
    input:
      evictor: {name: low-0, priority: 1}
      evictees: [{name: peer-0, priority: 100, node_name: n1}]
    expect: {victims: []}
"""


def outcomes(run):
    return {r.case.name: (r.outcome, r.message) for r in run.results}


def test_kube_scheduler_cases_run_through_its_verbs_and_pass(tmp_path):
    directory = write_policy_dir(tmp_path, policy=BOTH, fixtures=CASES)
    run = run_paths([directory])
    assert {name: outcome for name, (outcome, _) in outcomes(run).items()} == dict.fromkeys(
        ["a node of the zone is kept", "another zone is unresolvable", "a cordoned node may be freed by preemption",
         "scores are 0..10 integers", "only lower-priority pods are victims, named by name or UID",
         "a node with no victim left is dropped"], "PASS"), outcomes(run)
    actual = {r.case.name: r.actual for r in run.results}
    assert actual["only lower-priority pods are victims, named by name or UID"]["victim_uids"] == {
        "u-batch-0": "batch-0", "u-batch-1": "batch-1"}


def test_the_body_is_kube_schedulers_not_volcanos(tmp_path):
    directory = write_policy_dir(tmp_path, policy=BOTH, fixtures=CASES)
    from policy_extender.fixture_runner.bodies import request_body
    case = load_file(directory / "zone.fixtures.yaml")[1]
    body = json.loads(request_body(case))
    assert set(body) == {"Pod", "Nodes", "NodeNames"}
    assert body["Pod"]["metadata"]["name"] == "web-0"
    assert [n["metadata"]["name"] for n in body["Nodes"]["items"]] == ["n2"]


def test_a_wrong_kube_expectation_fails_with_a_diff(tmp_path):
    directory = write_policy_dir(tmp_path, policy=BOTH, fixtures="""\
        cases:
          - name: expects the wrong map
            protocol: kube-scheduler
            decision: filter
            input: {task: {name: t, annotations: {zone: a}}, node: {name: n2, labels: {zone: b}}}
            expect: {fits: false, unresolvable: false}
    """)
    [result] = run_paths([directory]).results
    assert result.outcome == "FAIL", result.message
    assert "-unresolvable: false" in result.diff and "+unresolvable: true" in result.diff
    assert "same-zone" in result.explanation


def test_a_failing_preempt_case_explains_each_node_by_victim_name(tmp_path):
    directory = write_policy_dir(tmp_path, policy=BOTH, fixtures="""\
        cases:
          - name: expects the peer too
            protocol: kube-scheduler
            decision: preempt
            input:
              evictor: {name: urgent-0, priority: 100}
              evictees:
                - {name: batch-0, priority: 10, node_name: n1}
                - {name: peer-0, priority: 100, node_name: n1}
                - {name: peer-1, priority: 100, node_name: n2}
            expect: {victims: [batch-0, peer-0]}
    """)
    [result] = run_paths([directory]).results
    assert result.outcome == "FAIL", result.message
    assert result.diff.splitlines()[3:] == [" victims:", " - batch-0", "-- peer-0"]
    assert result.explanation.splitlines() == [
        "node n1: permit: 1 evictee may be evicted: batch-0",
        "  protected evictee [1]: lower (zone.policy:8): peer-0 is not of lower priority",
        "node n2: permit: 0 evictees may be evicted",
        "  protected evictee [0]: lower (zone.policy:8): peer-1 is not of lower priority",
        "  no evictee qualifies: the node is left out of the answer (no preemption there)"]


def test_a_volcano_only_rule_does_not_answer_kube_scheduler(tmp_path):
    directory = write_policy_dir(tmp_path, policy="filter volcano-only: false\n", fixtures="""\
        cases:
          - name: with no kube-scheduler rule every node is kept
            protocol: kube-scheduler
            decision: filter
            input: {task: {name: t}, node: {name: n1}}
            expect: {fits: true}
          - name: Volcano's predicate rejects
            decision: filter
            input: {task: {name: t}, node: {name: n1}}
            expect: {fits: false, rule: volcano-only}
    """)
    assert {o for o, _ in outcomes(run_paths([directory])).values()} == {"PASS"}


def errors_of(tmp_path, case: str) -> list[str]:
    directory = write_policy_dir(tmp_path, policy=BOTH, fixtures="cases:\n" + case)
    return [r.message for r in run_paths([directory]).results if r.outcome == "ERROR"]


def test_what_kube_schedulers_answers_cannot_hold_is_an_error_at_its_line(tmp_path):
    [message] = errors_of(tmp_path / "code", """\
  - name: a code
    protocol: kube-scheduler
    decision: filter
    input: {task: {name: t}, node: {name: n1}}
    expect: {fits: false, code: 3}
""")
    assert message.endswith(":6: `code` is not an outcome of a filter decision of kube-scheduler: expect one of "
                            "audit, fits, nodes, reason, rule, unresolvable")
    [message] = errors_of(tmp_path / "score", """\
  - name: a fraction
    protocol: kube-scheduler
    decision: score
    input: {task: {name: t}, nodes: [{name: n1}]}
    expect: {scores: {n1: 2.5}}
""")
    assert ":6: kube-scheduler's scores are integers 0..10" in message
    [message] = errors_of(tmp_path / "session", """\
  - name: a session
    protocol: kube-scheduler
    decision: filter
    input: {task: {name: t}, node: {name: n1}}
    session: {jobs: []}
    expect: {fits: true}
""")
    assert ":6: kube-scheduler has no session" in message
    [message] = errors_of(tmp_path / "kind", """\
  - name: reclaim
    protocol: kube-scheduler
    decision: reclaimable
    input: {evictor: {name: t}, evictees: []}
    expect: {victims: []}
""")
    assert ":4: `decision:` for kube-scheduler must be one of filter, score, preemptable" in message
    [message] = errors_of(tmp_path / "protocol", """\
  - name: misspelt
    protocol: kube-schedular
    decision: filter
    input: {task: {name: t}, node: {name: n1}}
    expect: {fits: true}
""")
    assert ":3: `protocol:` is volcano or kube-scheduler; got 'kube-schedular' (did you mean 'kube-scheduler'?)" in message


def test_a_bad_compact_node_is_reported_at_its_line(tmp_path):
    [message] = errors_of(tmp_path, """\
  - name: bad quantity
    protocol: kube-scheduler
    decision: filter
    input:
      task: {name: t}
      node:
        name: n1
        allocatable: {gpu: lots}
    expect: {fits: true}
""")
    assert "zone.fixtures.yaml:9:" in message and "node.allocatable" in message, message


def test_coverage_counts_each_schedulers_outcomes_per_rule(tmp_path):
    directory = write_policy_dir(tmp_path, policy=BOTH, fixtures=CASES)
    (directory / "volcano.policy").write_text("filter gpu-nodes: node.idle.gpu > 0\n")
    report = run_paths([directory]).coverage.report()
    by_rule = {r["rule"]: r["by_protocol"] for r in report["per_rule"]}
    assert by_rule["same-zone"] == {"kube-scheduler": ["passed", "rejected"], "volcano": []}
    assert by_rule["lower"] == {"kube-scheduler": ["decided", "evaluated"], "volcano": []}
    assert by_rule["gpu-nodes"] == {"volcano": []}  # a kube-scheduler case never exercises it
    assert report["per_protocol"]["kube-scheduler"] == {"rules": 4, "exercised": 4, "percent": 100.0,
                                                        "never_exercised": []}
    assert report["per_protocol"]["volcano"]["exercised"] == 0
    text = render(report)
    assert "  kube-scheduler: 4/4 rules serving it exercised by its cases (100.0%)" in text
    assert "  volcano: 0/5 rules serving it exercised by its cases (0.0%)" in text
    assert "    not exercised by volcano: volcano.policy:1:1 filter gpu-nodes" in text


def test_the_shipped_policies_that_serve_kube_scheduler_are_tested_for_both_schedulers():
    # answer cases only: the outcome cases (Volcano's own scheduler) run in the slow tests
    answers = OutcomeSettings(enabled=False)
    for name in ("maintenance.fixtures.yaml", "a100-only.fixtures.yaml"):
        alone = run_paths([REPO / "policies" / name], settings=answers)
        assert {r.case.protocol for r in alone.results} == {"volcano", kube.PROTOCOL}, name
    run = run_paths([REPO / "policies" / "maintenance.fixtures.yaml", REPO / "policies" / "a100-only.fixtures.yaml"],
                    settings=answers)
    assert run.results and all(r.ok for r in run.results), [(r.case.name, r.message) for r in run.results if not r.ok]
    figures = run.coverage.report()["per_protocol"]
    assert figures["kube-scheduler"]["never_exercised"] == []


def test_eval_detects_a_kube_scheduler_body_and_decides_it_with_its_verbs(tmp_path, capsys):
    from policy_extender.cli import main
    from policy_extender.wire import compact
    directory = write_policy_dir(tmp_path, policy=BOTH, fixtures=CASES)
    body = tmp_path / "args.json"
    body.write_text(json.dumps(compact.extender_args_body(
        {"name": "web-0", "annotations": {"zone": "a"}}, [{"name": "n1", "labels": {"zone": "a"}},
                                                         {"name": "n2", "labels": {"zone": "b"}}])))
    assert main(["eval", str(body), "--verb", "filter", "--policies", str(directory), "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["verb"] == kube.DECISIONS["filter"].verb
    assert [n["metadata"]["name"] for n in shown["response"]["Nodes"]["items"]] == ["n1"]
    assert shown["response"]["FailedAndUnresolvableNodes"] == {"n2": "same-zone (zone.policy:2): node zone b is not a"}
    assert "decided by rule same-zone (zone.policy:2:1)" in shown["explanation"]
    # the same body said to be Volcano's is a predicate body it is not
    assert main(["eval", str(body), "--verb", "filter", "--policies", str(directory), "--protocol", "volcano"]) == 1
    assert "cannot be decoded" in capsys.readouterr().err
    # a verb kube-scheduler does not have, and a session it does not have
    assert main(["eval", str(body), "--verb", "reclaimable", "--policies", str(directory)]) == 2
    assert "kube-scheduler has no verb 'reclaimable': use one of filter, prioritize, preempt" in capsys.readouterr().err
    assert main(["eval", str(body), "--verb", "prioritize", "--policies", str(directory), "--session", str(body)]) == 2
    assert "kube-scheduler has no session" in capsys.readouterr().err
    assert main(["eval", str(body), "--verb", "prioritize", "--policies", str(directory)]) == 0
    assert capsys.readouterr().out.startswith(f"{kube.DECISIONS['score'].verb}: [{{\"Host\": \"n1\"")


def test_a_volcano_case_never_exercises_a_rule_serving_only_kube_scheduler(tmp_path):
    directory = write_policy_dir(tmp_path, policy="filter anywhere: true\n", fixtures="""\
        cases:
          - name: fits
            decision: filter
            input: {task: {name: t}, node: {name: n1}}
            expect: {fits: true}
    """)
    (directory / "kube.policy").write_text("protocol kube-scheduler\nfilter kube-only: true\n")
    report = run_paths([directory]).coverage.report()
    assert {r["rule"]: r["outcomes"] for r in report["per_rule"]} == {"anywhere": ["passed"], "kube-only": []}
    assert report["per_protocol"]["kube-scheduler"]["never_exercised"] == [
        {"rule": "kube-only", "kind": "filter", "where": "kube.policy:2:1"}]


def test_a_raw_body_of_several_nodes_is_expected_node_by_node(tmp_path):
    from policy_extender.wire import compact
    directory = write_policy_dir(tmp_path, policy=BOTH, fixtures="""\
        defaults: {protocol: kube-scheduler, decision: filter, body_file: captured-filter.json}
        cases:
          - name: each node's answer
            expect:
              nodes:
                n1: {fits: true}
                n2: {fits: false, unresolvable: true, rule: same-zone, reason: "zone b"}
                n3: {fits: false, unresolvable: false, rule: not-cordoned}
          - name: a wrong node
            expect: {nodes: {n3: {fits: true}}}
          - name: one answer for three nodes
            expect: {fits: true}
          - name: a Volcano outcome of a node
            expect: {nodes: {n1: {fits: false, code: 2}}}
    """)
    (directory / "captured-filter.json").write_text(json.dumps(compact.extender_args_body(
        {"name": "web-0", "annotations": {"zone": "a"}},
        [{"name": "n1", "labels": {"zone": "a"}}, {"name": "n2", "labels": {"zone": "b"}},
         {"name": "n3", "labels": {"zone": "a"}, "unschedulable": True}])))
    results = {r.case.name: r for r in run_paths([directory]).results}
    assert results["each node's answer"].outcome == "PASS", results["each node's answer"].message
    wrong = results["a wrong node"]
    assert wrong.outcome == "FAIL" and wrong.diff.splitlines()[3:] == [
        " nodes:", "   n3:", "-    fits: true", "+    fits: false"]
    assert results["one answer for three nodes"].outcome == "ERROR"
    assert results["one answer for three nodes"].message.endswith(
        ":12: this filter call sends 3 nodes, so `fits` cannot say which: expect per node, "
        "`nodes: {NAME: {fits: false, unresolvable: true}, ...}`")
    assert results["a Volcano outcome of a node"].outcome == "ERROR"
    assert results["a Volcano outcome of a node"].message.endswith(
        ":14: `code` is not something kube-scheduler's filter answer says of a node: expect one of fits, reason, "
        "rule, unresolvable")
