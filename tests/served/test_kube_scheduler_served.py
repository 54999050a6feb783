"""kube-scheduler's extender verbs served by a real ``policy-extender serve`` (gunicorn, 2 workers)
over loopback, beside Volcano's, from one policy directory.

Every answer is compared with an expectation worked out here from the bodies this test sends and
the policies below (tests/wire/kube/ holds the bodies, in the shape kube-scheduler sends them):
filter's FailedNodes and FailedAndUnresolvableNodes with their reasons, prioritize's 0..10
scores, preempt's victims by UID; then the errors, the metrics' protocol label, ``/why``,
``--record`` and replay, and a reload that changes both protocols' answers.
"""

from __future__ import annotations

import copy
import http.client
import json
import time
from pathlib import Path

import pytest

from policy_extender.policyset import load_directories
from policy_extender.replay.comparison import compare_recording
from policy_extender.wire import compact
from tests.support.policies import write_policies
from tests.support.volcano import Server, metric_samples

BODIES = Path(__file__).resolve().parents[1] / "wire" / "kube"
ZONE = "topology.kubernetes.io/zone"
FILTER, PRIORITIZE, PREEMPT = "/kube-scheduler/filter", "/kube-scheduler/prioritize", "/kube-scheduler/preempt"

POLICIES = {
    # served to both schedulers: the same rules answer Volcano's predicate and kube-scheduler's filter
    "both.policy": """\
protocol volcano, kube-scheduler

filter drained: node.labels["topology.kubernetes.io/zone"] != "us-east1-c"
  reason "zone us-east1-c is drained"

filter gpu: node.allocatable.gpu >= task.requests.gpu
  reason "node has {node.allocatable.gpu} GPUs, the pod asks for {task.requests.gpu}"
  unresolvable
""",
    "kube.policy": """\
protocol kube-scheduler

filter ready: node.ready
  reason "node {node.name} is not ready"

filter overflow: node.allocatable.memory * 100000000000 > 0
  reason "never shown"
  when node.labels["boom"] == "yes"

score gpus: node.allocatable.gpu * 1.25
  when (task.labels["spread"] ?? "") != "yes"

score zone-b: 4
  when (task.labels["spread"] ?? "") != "yes" and node.labels["topology.kubernetes.io/zone"] == "us-east1-b"

score spread: node.allocatable.cpu
  normalize 0 to 10
  when task.labels["spread"] == "yes"

score blow: node.allocatable.memory * 100000000000
  when node.labels["boom"] == "yes"

victim low: evictee.priority < evictor.priority
  reason "{evictee.name} has priority {evictee.priority}"
  when evictor.labels["team"] == "vision"

victim unprotected: evictee.annotations["scheduling.example.com/protected"] != "true"
  reason "{evictee.name} is protected"
  when evictor.labels["team"] == "vision"
""",
}


def body(verb: str) -> dict:
    return json.loads((BODIES / f"{verb}.json").read_bytes())


def post(port: int, path: str, data: bytes | dict) -> tuple[int, bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        payload = data if isinstance(data, bytes) else json.dumps(data).encode()
        connection.request("POST", path, body=payload, headers={"Content-Type": "application/json"})
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def call(port: int, path: str, data: bytes | dict):
    status, answer = post(port, path, data)
    assert status == 200, answer
    return json.loads(answer)


def get(port: int, path: str) -> dict:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        connection.request("GET", path)
        return json.loads(connection.getresponse().read())
    finally:
        connection.close()


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """One serve of POLICIES, recording into ``recording``; stopped (the recording flushed) by
    the test that replays it, or at the end."""
    state = tmp_path_factory.mktemp("kube-served")
    policies = write_policies(state / "policies", POLICIES)
    server = Server(state, policies, extra_args=("--record", str(state / "recording")))
    try:
        server.wait_ready()
        server.policies, server.recording = policies, state / "recording"
        yield server
    finally:
        server.stop()


# ---------------------------------------------------------------------------------------------
# filter


def expected_filter(nodes: list[dict], gpus: float) -> tuple[list[str], dict, dict]:
    """(kept, FailedNodes, FailedAndUnresolvableNodes) of POLICIES, rule by rule in file order."""
    kept, failed, unresolvable = [], {}, {}
    for node in nodes:
        name, status = node["metadata"]["name"], node["status"]
        have = float(status["allocatable"].get("nvidia.com/gpu", "0"))
        ready = any(c["type"] == "Ready" and c["status"] == "True" for c in status["conditions"])
        if node["metadata"]["labels"][ZONE] == "us-east1-c":
            failed[name] = "drained (both.policy:3): zone us-east1-c is drained"
        elif have < gpus:
            unresolvable[name] = f"gpu (both.policy:6): node has {have:g} GPUs, the pod asks for {gpus:g}"
        elif not ready:
            failed[name] = f"ready (kube.policy:3): node {name} is not ready"
        else:
            kept.append(name)
    return kept, failed, unresolvable


def test_filter_answers_failed_and_unresolvable_nodes_with_their_reasons(served):
    sent = body("filter")
    answer = call(served.port, FILTER, sent)
    kept, failed, unresolvable = expected_filter(sent["Nodes"]["items"], 1)
    as_sent = {node["metadata"]["name"]: node for node in sent["Nodes"]["items"]}
    # each kept node goes back whole, as sent: kube-scheduler builds the rest of its cycle's
    # NodeInfos (its score plugins, the extender's prioritize) from the answer's objects
    assert answer == {"Nodes": {"metadata": {}, "items": [as_sent[n] for n in kept]},
                      "NodeNames": None, "FailedNodes": failed, "FailedAndUnresolvableNodes": unresolvable,
                      "Error": ""}
    assert kept == ["gpu-b-1"] and set(failed) == {"gpu-c-1", "gpu-b-2"} and list(unresolvable) == ["cpu-b-1"]


def test_filter_of_a_thousand_nodes_keeps_a_subset_of_them_and_accounts_for_every_node(served):
    sent = body("filter")
    templates = sent["Nodes"]["items"]
    nodes = []
    for i in range(1000):
        node = copy.deepcopy(templates[i % len(templates)])
        node["metadata"]["name"] = f"node-{i:04d}"
        node["metadata"]["labels"][ZONE] = ("us-east1-b", "us-east1-c", "us-east1-d")[i % 3]
        nodes.append(node)
    sent["Nodes"]["items"] = nodes
    answer = call(served.port, FILTER, sent)
    kept = [item["metadata"]["name"] for item in answer["Nodes"]["items"]]
    assert (kept, answer["FailedNodes"], answer["FailedAndUnresolvableNodes"]) == expected_filter(nodes, 1)
    names = [n["metadata"]["name"] for n in nodes]
    assert set(kept) <= set(names) and kept == [n for n in names if n in set(kept)]  # a subset, in order
    assert len(kept) + len(answer["FailedNodes"]) + len(answer["FailedAndUnresolvableNodes"]) == 1000
    assert 0 < len(kept) < 1000


def test_one_serve_answers_volcanos_predicate_and_kube_schedulers_filter_from_one_directory(served):
    task = {"name": "t", "requests": {"gpu": 1}}
    drained = {"name": "c-1", "labels": {ZONE: "us-east1-c"}, "allocatable": {"gpu": 8}}
    answer = call(served.port, "/predicate", compact.predicate_body(task, drained))
    assert answer == {"status": "drained (both.policy:3): zone us-east1-c is drained", "code": 2}
    answer = call(served.port, FILTER, compact.extender_args_body(task, [drained]))
    assert answer["FailedNodes"] == {"c-1": "drained (both.policy:3): zone us-east1-c is drained"}
    # a kube-scheduler-only rule does not decide Volcano's calls: not-ready passes the predicate
    not_ready = {"name": "b-9", "labels": {ZONE: "us-east1-b"}, "allocatable": {"gpu": 8}, "ready": False}
    assert call(served.port, "/predicate", compact.predicate_body(task, not_ready)) == {"status": "", "code": 0}
    assert call(served.port, FILTER, compact.extender_args_body(task, [not_ready]))["FailedNodes"] == \
        {"b-9": "ready (kube.policy:3): node b-9 is not ready"}


# ---------------------------------------------------------------------------------------------
# prioritize


def test_prioritize_sums_clamps_to_10_and_rounds_half_up(served):
    # gpus 1.25 per GPU, zone-b 4: gpu-b-1 8*1.25+4=14 -> 10 (clamped), gpu-c-1 10, cpu-b-1 0+4=4,
    # gpu-b-2 2*1.25+4=6.5 -> 7 (half up; Python's round gives 6)
    answer = call(served.port, PRIORITIZE, body("prioritize"))
    assert answer == [{"Host": "gpu-b-1", "Score": 10}, {"Host": "gpu-c-1", "Score": 10},
                      {"Host": "cpu-b-1", "Score": 4}, {"Host": "gpu-b-2", "Score": 7}]
    assert all(type(entry["Score"]) is int for entry in answer)


def test_prioritize_with_normalize_0_to_10_spreads_a_rules_values_over_the_range(served):
    sent = body("prioritize")
    sent["Pod"]["metadata"]["labels"]["spread"] = "yes"
    for node, cpu in zip(sent["Nodes"]["items"], ("2", "4", "6", "7")):
        node["status"]["allocatable"]["cpu"] = cpu
    answer = call(served.port, PRIORITIZE, sent)
    assert [(e["Host"], e["Score"]) for e in answer] == [("gpu-b-1", 0), ("gpu-c-1", 4), ("cpu-b-1", 8),
                                                         ("gpu-b-2", 10)]


# ---------------------------------------------------------------------------------------------
# preempt


def test_preempt_names_the_victims_the_rules_allow_by_uid_and_drops_a_node_with_none_left(served):
    answer = call(served.port, PREEMPT, body("preempt"))
    # gpu-b-1: priority 100 goes, 5000 stays; gpu-b-2: its one victim is protected -> left out
    assert answer == {"NodeNameToMetaVictims": {
        "gpu-b-1": {"Pods": [{"UID": "1c0ffee0-0000-4000-8000-000000000001"}], "NumPDBViolations": 1}}}


def test_preempt_where_no_rule_applies_keeps_every_victim_proposed(served):
    sent = body("preempt")
    sent["Pod"]["metadata"]["labels"]["team"] = "audio"  # the victim rules apply to team vision only
    answer = call(served.port, PREEMPT, sent)
    assert answer == {"NodeNameToMetaVictims": {
        node: {"Pods": [{"UID": p["metadata"]["uid"]} for p in victims["Pods"]],
               "NumPDBViolations": victims["NumPDBViolations"]}
        for node, victims in sent["NodeNameToVictims"].items()}}


# ---------------------------------------------------------------------------------------------
# errors


@pytest.mark.parametrize("path", [FILTER, PRIORITIZE, PREEMPT])
def test_bad_bodies_are_400_with_the_error_in_go_keys(served, path):
    status, answer = post(served.port, path, b'{"Pod": ')
    assert status == 400 and json.loads(answer)["Error"].endswith("$: malformed JSON: Input data was truncated")
    no_pod = body("preempt" if path == PREEMPT else "filter")
    del no_pod["Pod"]
    status, answer = post(served.port, path, no_pod)
    assert status == 400 and "$.Pod: missing" in json.loads(answer)["Error"]


def test_a_bad_quantity_is_a_400_naming_the_field(served):
    sent = body("filter")
    sent["Nodes"]["items"][2]["status"]["allocatable"]["memory"] = "60 GB"
    status, answer = post(served.port, FILTER, sent)
    assert status == 400
    assert json.loads(answer)["Error"] == ("kube-scheduler.filter: $.Nodes.items[2].status.allocatable.memory: "
                                           "expected a Kubernetes quantity string such as \"2\", \"500m\" or \"4Gi\"")


def test_an_evaluation_error_fails_the_filter_in_its_answer_and_prioritize_with_a_500(served):
    sent = body("filter")
    sent["Nodes"]["items"][0]["metadata"]["labels"]["boom"] = "yes"  # 62Gi * 1e11 is past 2^63
    answer = call(served.port, FILTER, sent)
    assert answer["Nodes"]["items"] == [] and answer["FailedNodes"] == {} and "E510" in answer["Error"]
    assert answer["Error"].startswith("kube-scheduler.filter failed: ") and "overflow" in answer["Error"]
    status, text = post(served.port, PRIORITIZE, sent)
    assert status == 500 and "E510" in json.loads(text)["Error"]


def test_node_cache_capable_bodies_are_refused_saying_how_to_fix(served):
    sent = body("filter")
    sent["NodeNames"] = [n["metadata"]["name"] for n in sent.pop("Nodes")["items"]]
    refusal = ("nodeCacheCapable: true sends node names only and policy-extender keeps no node cache; "
               "set nodeCacheCapable: false")
    answer = call(served.port, FILTER, sent)
    assert answer["Error"] == f"kube-scheduler.filter: {refusal}" and answer["Nodes"]["items"] == []
    status, text = post(served.port, PRIORITIZE, sent)
    assert status == 500 and json.loads(text) == {"Error": f"kube-scheduler.prioritize: {refusal}"}
    preempt = body("preempt")
    preempt["NodeNameToMetaVictims"] = {n: {"Pods": [{"UID": p["metadata"]["uid"]} for p in v["Pods"]],
                                            "NumPDBViolations": 0} for n, v in preempt.pop("NodeNameToVictims").items()}
    status, text = post(served.port, PREEMPT, preempt)
    assert status == 500 and json.loads(text) == {"Error": f"kube-scheduler.preempt: {refusal}"}


# ---------------------------------------------------------------------------------------------
# metrics, /why, record and replay (after the calls above)


def wait_for(check, seconds: float = 15.0):
    deadline = time.monotonic() + seconds
    while True:
        found = check()
        if found or time.monotonic() > deadline:
            return found
        time.sleep(0.3)


def test_metrics_count_kube_scheduler_calls_under_their_protocol(served):
    for _ in range(3):
        call(served.port, FILTER, body("filter"))
    call(served.port, "/predicate", compact.predicate_body({"name": "t"}, {"name": "n"}))
    samples = metric_samples(served.port)
    kube_ok = ("policy_extender_requests_total",
               (("code", "200"), ("protocol", "kube-scheduler"), ("verb", "kube-scheduler.filter")))
    assert samples[kube_ok] >= 3
    assert samples[("policy_extender_requests_total",
                    (("code", "200"), ("protocol", "volcano"), ("verb", "predicate")))] >= 1
    assert samples[("policy_extender_requests_total",
                    (("code", "400"), ("protocol", "kube-scheduler"), ("verb", "kube-scheduler.filter")))] >= 1
    # each node a filter rejects is one decision of its rule (3 calls x 1 node each, at least)
    drained = ("policy_extender_decisions_total", (("outcome", "reject"), ("protocol", "kube-scheduler"),
                                                   ("rule", "drained"), ("verb", "kube-scheduler.filter")))
    assert samples[drained] >= 3
    assert samples[("policy_extender_request_duration_seconds_count",
                    (("protocol", "kube-scheduler"), ("verb", "kube-scheduler.prioritize")))] >= 1


def test_why_shows_the_pods_kube_scheduler_decisions_per_verb(served):
    call(served.port, FILTER, body("filter"))
    call(served.port, PRIORITIZE, body("prioritize"))
    call(served.port, PREEMPT, body("preempt"))

    keys = ("kube-scheduler.filter", "kube-scheduler.prioritize", "kube-scheduler.preempt")

    def found():  # the calls may straddle two windows (a minute each): each key in the newest holding it
        cycles = get(served.port, "/why?task=ml/train-7d9f-x2x4q")["cycles"]
        shown = {k: next((c for c in cycles if k in c), None) for k in keys}
        return shown if all(shown.values()) else None

    def flushed():  # this test's calls, not only an earlier test's in the same window: the
        shown = found()  # workers flush their tallies in the background, each in its own time
        preempt = shown and shown["kube-scheduler.preempt"]["kube-scheduler.preempt"]["kube-scheduler.preempt"]
        return shown if preempt and preempt.get("victims_permitted") else None
    cycles = wait_for(flushed) or found()
    assert cycles, get(served.port, "/why?task=ml/train-7d9f-x2x4q")
    assert all(c["cycle"].startswith("kube-scheduler@") for c in cycles.values())
    filtered = cycles["kube-scheduler.filter"]["kube-scheduler.filter"]
    assert filtered["answers"] >= 4 and filtered["fit"] >= 1
    assert filtered["rejected_by"]["gpu"]["example"] == "gpu (both.policy:6): node has 0 GPUs, the pod asks for 1"
    assert cycles["kube-scheduler.prioritize"]["kube-scheduler.prioritize"]["top_nodes"][0]["score"] == 10
    preempted = cycles["kube-scheduler.preempt"]["kube-scheduler.preempt"]["kube-scheduler.preempt"]
    assert preempted["calls_as_evictor"] >= 2 and preempted["victims_permitted"] >= 1


def test_recorded_kube_scheduler_calls_replay_through_the_kube_verbs(served, tmp_path):
    call(served.port, FILTER, body("filter"))
    served.stop()  # the recorder writes what it holds
    same = compare_recording(str(served.recording), load_directories((str(served.policies),)))
    assert same.calls >= 10 and same.decisions >= 10 and same.changes == [] and not same.problems
    drained_b = {**POLICIES, "both.policy": POLICIES["both.policy"].replace("us-east1-c", "us-east1-b")}
    candidate = write_policies(tmp_path / "candidate", drained_b)
    changed = compare_recording(str(served.recording), load_directories((str(candidate),)))
    flips = {(c.verb, c.node, c.kind) for c in changed.changes}
    assert {("kube-scheduler.filter", "gpu-b-1", "now unfit"), ("kube-scheduler.filter", "gpu-c-1", "now fits"),
            ("kube-scheduler.filter", "gpu-b-2", "reason")} <= flips
    assert "ml/train-7d9f-x2x4q" in {c.subject for c in changed.changes if c.verb == "kube-scheduler.filter"}


def test_a_reload_changes_both_protocols_answers(tmp_path):
    policies = write_policies(tmp_path / "policies", POLICIES)
    server = Server(tmp_path, policies, workers=1, reload_interval=0.2)
    try:
        server.wait_ready()
        task = {"name": "t", "requests": {"gpu": 1}}
        node_b = {"name": "b-1", "labels": {ZONE: "us-east1-b"}, "allocatable": {"gpu": 8}}
        assert call(server.port, "/predicate", compact.predicate_body(task, node_b))["code"] == 0
        assert call(server.port, FILTER, compact.extender_args_body(task, [node_b]))["FailedNodes"] == {}
        (policies / "both.policy").write_text(POLICIES["both.policy"].replace("us-east1-c", "us-east1-b"))
        reason = "drained (both.policy:3): zone us-east1-b is drained"
        assert wait_for(lambda: call(server.port, FILTER, compact.extender_args_body(task, [node_b]))[
            "FailedNodes"] == {"b-1": reason})
        assert call(server.port, "/predicate", compact.predicate_body(task, node_b)) == {"status": reason, "code": 2}
    finally:
        server.stop()



def test_a_recording_of_both_schedulers_becomes_fixtures_of_both_that_pass(tmp_path):
    """serve --record over real HTTP, Volcano's cycle and kube-scheduler's calls; replay
    --to-fixtures writes kube-scheduler's as ``protocol: kube-scheduler`` cases (compact where the
    body allows, its body_file otherwise), and `policy-extender test` passes on what it wrote."""
    from policy_extender.cli import main
    from policy_extender.fixture_runner.results import PASS
    from policy_extender.fixture_runner.runner import run_paths
    from tests.support.recorded import cycle_calls
    import yaml

    policies = write_policies(tmp_path / "policies", POLICIES)
    server = Server(tmp_path, policies, extra_args=("--record", str(tmp_path / "recording")))
    try:
        server.wait_ready()
        for verb, data in cycle_calls():
            assert post(server.port, f"/{verb}", data)[0] == 200, verb
        one = {**body("filter"), "Nodes": {"metadata": {}, "items": body("filter")["Nodes"]["items"][:1]}}
        for path, data in ((FILTER, body("filter")), (FILTER, one), (PRIORITIZE, body("prioritize")),
                           (PREEMPT, body("preempt")),
                           (FILTER, compact.extender_args_body({"name": "p", "requests": {"gpu": 9}},
                                                               [{"name": "n1", "allocatable": {"gpu": 8}}]))):
            call(server.port, path, data)
    finally:
        server.stop()
    out = tmp_path / "fixtures"
    assert main(["replay", str(tmp_path / "recording"), "--policies", str(policies), "--to-fixtures", str(out)]) == 0
    cases = [case for file in out.glob("*.fixtures.yaml") for case in yaml.safe_load(file.read_text())["cases"]]
    kube_cases = [case for case in cases if case.get("protocol") == "kube-scheduler"]
    assert {case["decision"] for case in kube_cases} == {"filter", "score", "preemptable"}
    assert {case["decision"] for case in cases if "protocol" not in case} >= {"filter", "score", "preemptable"}
    compacted = [case for case in kube_cases if "input" in case]
    assert {"task", "node"} <= set(compacted[0]["input"]) and len(compacted) >= 1
    assert {"fits": False, "unresolvable": True, "rule": "gpu"}.items() <= next(
        case["expect"] for case in compacted if case["input"]["node"]["name"] == "n1").items()
    several = next(case for case in kube_cases if case["decision"] == "filter" and "nodes" in case["expect"])
    assert "body_file" in several and len(several["expect"]["nodes"]) == len(body("filter")["Nodes"]["items"])
    results = run_paths([str(out)]).results
    assert results and all(result.outcome == PASS for result in results), \
        [(r.case.name, r.outcome, r.message) for r in results if r.outcome != PASS]
    assert sum(r.case.protocol == "kube-scheduler" for r in results) == len(kube_cases) >= 5
    assert main(["test", str(out)]) == 0
