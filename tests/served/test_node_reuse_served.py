"""Served by a real gunicorn with 2 workers, predicates whose nodes change between tasks (an
allocation changes a node's idle GPUs, same name, same length), and each task's prioritize over
those nodes, answer exactly what the same service answers with node reuse off, call for call,
and the reusing server did reuse nodes."""

from __future__ import annotations

from pathlib import Path

import orjson

from bench.generate import Bodies, Cluster, ClusterSpec
from policy_extender import trace
from tests.support.volcano import Server, VolcanoClient, traced_calls

ROOT = Path(__file__).resolve().parents[2]
GPU = "nvidia.com/gpu"


def with_idle_gpus(body: bytes, milli: int) -> bytes:
    """The body with its node's idle GPUs set to ``milli``, compact as Go writes it."""
    data = orjson.loads(body)
    data["node"]["Idle"]["ScalarResources"][GPU] = milli
    return orjson.dumps(data)


def cycle_bodies(nodes: int) -> list[bytes]:
    """4 tasks x every node; between tasks nodes 0, 2, 4, ... go from 3000 to 1000 idle milli-GPUs
    and back (a 2-GPU task fits, then does not): the same node name and body length, other bytes."""
    bodies = Bodies(Cluster(ClusterSpec(nodes=nodes, pods_per_node=20)))
    calls = []
    for task in range(4):
        for node in range(nodes):
            body = bodies.predicate(node, 0, task)
            if node % 2 == 0:
                body = with_idle_gpus(body, 1000 if task % 2 else 3000)
            calls.append(body)
    return calls


def node_part(body: bytes) -> bytes:
    return body[body.find(b',"node":') + len(b',"node":'):-1]


def prioritize_of(predicates: list[bytes]) -> bytes:
    """The prioritize body over the nodes of one task's predicate bodies, as Go writes it: the
    task, then the very node bytes the predicates carried."""
    first = predicates[0]
    task = first[len(b'{"task":'):first.find(b',"node":')]
    return b'{"task":' + task + b',"nodes":[' + b",".join(node_part(b) for b in predicates) + b"]}"


def test_changing_nodes_answer_and_score_as_with_reuse_off(monkeypatch, tmp_path):
    calls = cycle_bodies(12)
    first, second = node_part(calls[0]), node_part(calls[12])
    assert first != second and len(first) == len(second), \
        "node 0 changes but keeps its length: only the full comparison tells the two apart"
    path = tmp_path / "on.trace"
    monkeypatch.setenv(trace.ENV, str(path))
    on = Server(tmp_path, ROOT / "bench" / "policies", workers=2, threads=4)
    monkeypatch.delenv(trace.ENV)
    off = Server(tmp_path, ROOT / "bench" / "policies", workers=2, threads=4,
                 extra_args=("--node-reuse-bytes", "0"))
    try:
        on.wait_ready()
        off.wait_ready()
        answers, scores = {}, {}
        for name, server in (("on", on), ("off", off)):
            client = VolcanoClient(server.port, workers=6, timeout=30)
            answers[name], scores[name] = [], []
            for t in range(4):
                # each task's predicates on 6 connections (both workers), then again on this
                # thread's own connection, whose worker then keeps every node the task's
                # prioritize (on that connection) carries; a worker that kept only some gives
                # the walk up by design (wire.node_reuse._walk), which would leave nothing to see
                # (a prioritize also goes before that: its worker may then hold older bytes of
                # the changed nodes, which must not answer for the new ones)
                task_calls = calls[t * 12:(t + 1) * 12]
                answers[name] += client.parallel("predicate", task_calls)
                scores[name].append(client.call("prioritize", prioritize_of(task_calls))["nodeScore"])
                answers[name] += [client.call("predicate", body) for body in task_calls]
                scores[name].append(client.call("prioritize", prioritize_of(task_calls))["nodeScore"])
            client.close()
        flags = [line["values"].get("node_reused", 0) for line in traced_calls(path, "predicate", 2 * len(calls))]
        prioritized = sorted(traced_calls(path, "prioritize", 8), key=lambda line: line["start"])
        taken = [line["values"].get("nodes_reused", 0) for line in prioritized][1::2]  # the second of each task
    finally:
        on.stop()
        off.stop()
    assert answers["on"] == answers["off"]
    assert scores["on"] == scores["off"]
    assert scores["off"][0] != scores["off"][2], "the changed nodes must change the scores"
    assert len(taken) == 4 and sum(taken) > 0, f"prioritize must have taken kept nodes: {taken}"
    assert taken == [12, 12, 12, 12], "the worker that had every node's current bytes took them all"
    assert answers["off"][0] != answers["off"][24], "node 0's answer must change with its idle GPUs"
    assert len(flags) == 2 * len(calls) and sum(flags) >= 12, f"node reuse must have been used: {sum(flags)} reused"
