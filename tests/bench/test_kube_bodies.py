"""bench/served/kube_scheduler.py: kube-scheduler's extender bodies as its HTTPExtender sends them
(nodeCacheCapable: false), the samples written from them, and the benchmark's policy."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from bench.served.kube_scheduler import KUBE_POLICY_DIR, SAMPLES, KubeBodies, write_samples
from policy_extender.policyset import load_directories

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def bodies() -> KubeBodies:
    return KubeBodies(nodes=12, pods_per_node=8)


def test_filter_and_prioritize_args_are_go_encoded_extender_args(bodies):
    args = orjson.loads(bodies.args())
    assert list(args) == ["Pod", "Nodes", "NodeNames"] and args["NodeNames"] is None
    assert args["Nodes"]["metadata"] == {} and len(args["Nodes"]["items"]) == 12
    for index, node in enumerate(args["Nodes"]["items"]):
        assert node["metadata"]["name"] == bodies.node_name(index)
        assert {"labels", "annotations", "managedFields"} <= set(node["metadata"])  # the node informer keeps them
        assert {"allocatable", "capacity", "conditions", "images", "nodeInfo", "addresses"} <= set(node["status"])
        assert any(c["type"] == "Ready" and c["status"] == "True" for c in node["status"]["conditions"])
    assert len(orjson.dumps(args["Nodes"]["items"][0])) > 5000  # real-shaped, not a stub


def test_the_pod_is_pending_for_the_default_scheduler_without_managed_fields(bodies):
    pod = orjson.loads(bodies.args(1))["Pod"]
    assert "managedFields" not in pod["metadata"]  # kube-scheduler's pod informer drops them
    assert "nodeName" not in pod["spec"] and pod["status"]["phase"] == "Pending"
    assert pod["spec"]["schedulerName"] == "default-scheduler"
    assert pod["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"]  # a whole-unit quantity
    assert pod["metadata"]["uid"] and pod["metadata"]["namespace"]


def test_preempt_args_propose_pods_that_run_on_their_node(bodies):
    args = orjson.loads(bodies.preempt(nodes=3, victims_per_node=4))
    assert list(args) == ["Pod", "NodeNameToVictims", "NodeNameToMetaVictims"] and args["NodeNameToMetaVictims"] is None
    assert list(args["NodeNameToVictims"]) == [bodies.node_name(i) for i in range(3)]
    for name, victims in args["NodeNameToVictims"].items():
        assert set(victims) == {"Pods", "NumPDBViolations"} and len(victims["Pods"]) == 4
        for pod in victims["Pods"]:
            assert pod["spec"]["nodeName"] == name and pod["status"]["phase"] == "Running"
            assert "managedFields" not in pod["metadata"]
    uids = [p["metadata"]["uid"] for v in args["NodeNameToVictims"].values() for p in v["Pods"]]
    assert len(set(uids)) == len(uids)


def test_a_cordoned_node_is_unschedulable_and_tainted(bodies):
    node = bodies.cordoned(2)
    assert node["spec"]["unschedulable"] is True
    assert {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}.items() <= node["spec"]["taints"][-1].items()
    assert "unschedulable" not in bodies.node(2)["spec"]  # the informer's copy is left alone


def test_bodies_are_deterministic():
    assert KubeBodies(5).args() == KubeBodies(5).args()
    assert KubeBodies(5).args() != KubeBodies(5, seed=2).args()


def test_the_repository_samples_are_what_the_generator_writes(tmp_path):
    write_samples(tmp_path)
    for name in ("filter", "prioritize", "preempt"):
        assert (tmp_path / f"{name}.json").read_text() == (SAMPLES / f"{name}.json").read_text(), \
            "regenerate: python -m bench.served.kube_scheduler"
        json.loads((SAMPLES / f"{name}.json").read_text())


def test_the_benchmark_policy_serves_kube_scheduler_only():
    policy_set = load_directories([KUBE_POLICY_DIR])
    assert policy_set.for_protocol("kube-scheduler").kinds == {"filter", "score"}
    assert policy_set.for_protocol("volcano").kinds == frozenset()
    assert Path(KUBE_POLICY_DIR, "nodes.policy").read_text().startswith("#")


@pytest.mark.slow
def test_a_quick_kube_run_serves_every_call_and_says_what_the_service_answered(tmp_path):
    out = tmp_path / "rows.json"
    run = subprocess.run([sys.executable, "-m", "bench", "kube-filter-100", "kube-prioritize-100", "--quick",
                          "--json", str(out)], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    rows = [r for r in json.loads(out.read_text())["rows"] if r.get("server")]
    assert {(r["scenario"], r["server"]) for r in rows} == {
        (f"kube-{verb}-100", server) for verb in ("filter", "prioritize") for server in ("bare", "service")}
    for row in rows:
        assert row["errors"] == 0 and row["n"] > 0 and row["nodes"] == 6, row
    assert "the service's answer: HTTP 200, 2 nodes fit, 0 failed, 4 failed unresolvably, Error ''" in run.stdout
    assert "the service's answer: HTTP 200, 6 scores" in run.stdout
