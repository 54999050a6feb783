"""A recorded kube-scheduler body as a fixture case's input (``replay.kube_cases``): compact when
the compact objects read back from it expand into a body a kube-scheduler rule reads the same,
the raw body otherwise."""

from __future__ import annotations

import json

import pytest

from bench.served.kube_scheduler import KubeBodies
from policy_extender.decide.kube_table import BY_DECISION
from policy_extender.replay.kube_cases import compact_input

BODIES = KubeBodies(3)
#: real-shaped bodies (v1.Pod, v1.Node as kube-scheduler sends them) whose shape compact can say
SAYABLE = {"filter": BODIES.args(1), "score": BODIES.args(3), "preemptable": BODIES.preempt(nodes=1, victims_per_node=2)}


@pytest.mark.parametrize("decision", SAYABLE)
def test_a_body_compact_can_say_becomes_the_cases_compact_input(decision):
    verb = BY_DECISION[decision]
    found = compact_input(verb, SAYABLE[decision])
    assert found is not None and set(found) == set(verb.inputs)
    sent = json.loads(SAYABLE[decision])
    assert (found.get("task") or found.get("evictor"))["name"] == sent["Pod"]["metadata"]["name"]
    if decision == "filter":
        assert found["node"]["name"] == sent["Nodes"]["items"][0]["metadata"]["name"]
        assert found["node"]["labels"] and found["node"]["allocatable"]
    if decision == "preemptable":
        assert [e["uid"] for e in found["evictees"]] == \
            [p["metadata"]["uid"] for v in sent["NodeNameToVictims"].values() for p in v["Pods"]]


def _without_pid_pressure(body: bytes) -> bytes:
    args = json.loads(body)
    for node in args["Nodes"]["items"]:
        node["status"]["conditions"] = [c for c in node["status"]["conditions"] if c["type"] != "PIDPressure"]
    return json.dumps(args).encode()


@pytest.mark.parametrize("decision, body, why", [
    ("filter", BODIES.args(3), "a filter case is one node: three need the raw body"),
    ("preemptable", BODIES.preempt(nodes=2, victims_per_node=2), "a PDB violated (compact victims violate none)"),
    ("score", _without_pid_pressure(BODIES.args(2)), "a compact node always has the PIDPressure condition"),
])
def test_a_body_compact_cannot_say_keeps_its_raw_body(decision, body, why):
    assert compact_input(BY_DECISION[decision], body) is None, why
