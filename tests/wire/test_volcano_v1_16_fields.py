"""The fields Volcano v1.16 adds to the bodies (volcano-wire.md, "What changed in each release"),
with values, decode to the same views as without them: ``NodeInfo.UnassignedNumaPods`` is a map
whose keys are JSON objects written as strings (``PodMeta.MarshalText``), ``TaskInfo.PodAnnotations``
the scheduler-owned copy of the pod's annotations. Policies read the pod's own annotations
(``task.annotations``): before bind the two are equal unless a plugin merged some in, and the
extender is asked before any plugin could.

The shapes are read from Volcano v1.16.0-alpha.1's source (pkg/scheduler/api/numa_info.go,
job_info.go); its scheduler cannot be built from ../shared (docs/e2e-volcano.md, "Releases")."""

from __future__ import annotations

import json

import pytest

from policy_extender.policyset import compile_sources
from policy_extender.wire.decode import decode_predicate
from policy_extender.wire.snapshot import decode_session_open

from tests.support.bodies import sample

POD_META = json.dumps({"uid": "7d0c1c1e-4b5a-4bb1-9d25-3a0c2b1e9f00", "name": "numa-0", "namespace": "ml"},
                      separators=(",", ":"))
UNASSIGNED = {POD_META: {"cpu": [0, 1, 2, 3], "memory": [0]}}


def with_v1_16_fields(body: dict) -> dict:
    body["node"]["UnassignedNumaPods"] = UNASSIGNED
    body["task"]["PodAnnotations"] = {"scheduler-owned/annotation": "merged", "scheduling.example.com/protected": "no"}
    return body


def test_a_predicate_body_with_v1_16_fields_decodes_as_without_them(full):
    plain = json.loads(sample("predicate"))
    before = decode_predicate(json.dumps(plain).encode(), full)
    after = decode_predicate(json.dumps(with_v1_16_fields(plain)).encode(), full)
    assert after.node.name == before.node.name and after.node.idle.gpu == before.node.idle.gpu
    assert [t.name for t in after.node.tasks] == [t.name for t in before.node.tasks]
    assert after.task.annotations == before.task.annotations  # the pod's, not PodAnnotations
    assert after.task.annotations["scheduling.example.com/protected"] == "true"


#: A set that keeps the snapshot's nodes (it reads cluster.nodes), so their bodies are decoded.
CLUSTER_READS = compile_sources({"c.policy": "filter pool: count(n for n in cluster.nodes if n.idle.gpu > 0) > 0\n"}).reads


@pytest.mark.parametrize("value", [UNASSIGNED, None, {}])
def test_an_open_body_with_unassigned_numa_pods_decodes(value):
    body = json.loads(sample("onSessionOpen"))
    for node in body["Nodes"].values():
        node["UnassignedNumaPods"] = value
    snapshot = decode_session_open(json.dumps(body).encode(), CLUSTER_READS)
    plain = decode_session_open(sample("onSessionOpen"), CLUSTER_READS)
    assert snapshot.nodes is not None and plain.nodes is not None
    assert snapshot.nodes == plain.nodes and len(snapshot.nodes) > 0
