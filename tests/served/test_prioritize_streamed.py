"""A served prioritize of many nodes is decoded while it arrives (``wire/prioritize_stream.py``)
and answers exactly what the same call decoded whole answers."""

from __future__ import annotations

import io
import time
from pathlib import Path

import orjson
import pytest

from policy_extender import trace
from policy_extender.wire import prioritize_stream
from tests.support.volcano import Server, VolcanoClient, body_maps, traced_calls

ROOT = Path(__file__).resolve().parents[2]


def test_a_large_prioritize_streamed_answers_what_the_whole_decode_answers(monkeypatch, tmp_path):
    from bench.generate import Bodies, Cluster, ClusterSpec, write_snapshot

    path = tmp_path / "calls.trace"
    monkeypatch.setenv(trace.ENV, str(path))
    cluster = Cluster(ClusterSpec(nodes=200, pods_per_node=20))
    snapshot = io.BytesIO()
    write_snapshot(cluster, snapshot)
    compact = Bodies(cluster).prioritize()
    # the same call in another layout (indented): not streamed, decoded whole
    indented = orjson.dumps(orjson.loads(compact), option=orjson.OPT_INDENT_2)
    assert len(compact) > prioritize_stream.STREAM_FROM
    server = Server(tmp_path, ROOT / "bench" / "policies", workers=1, threads=2)
    try:
        server.wait_ready()
        client = VolcanoClient(server.port, timeout=30)
        assert client.raw("onSessionOpen", snapshot.getvalue())[0] == 200
        answers = [client.raw("prioritize", body) for body in (compact, indented, compact)]
        client.close()
        lines = traced_calls(path, "prioritize", 3)
    finally:
        server.stop()
    assert [status for status, _ in answers] == [200, 200, 200]
    scores = [orjson.loads(body)["nodeScore"] for _, body in answers]
    assert len(scores[0]) == 200 and len(set(scores[0].values())) > 1, "the policy must tell nodes apart"
    assert scores[0] == scores[1] == scores[2]
    pieces = [line["values"].get("pieces", 0) for line in lines]
    assert pieces[0] > 0 and pieces[2] > 0, "a 27 MB compact body is decoded while it arrives"
    assert pieces[1] == 0, "an indented body is not split"


def worker_rss_mb(master: int) -> int:
    """The summed VmRSS of ``master``'s children (the gunicorn workers), in MB, once it settles
    (the answer goes before a mapped body is released)."""
    last = None
    for _ in range(30):
        pids = [int(p) for t in Path(f"/proc/{master}/task").iterdir()
                for p in (t / "children").read_text().split()]
        now = sum(int(line.split()[1]) for pid in pids
                  for line in Path(f"/proc/{pid}/status").read_text().splitlines()
                  if line.startswith("VmRSS:")) // 1024
        if now == last:
            return now
        last = now
        time.sleep(0.2)
    return last  # type: ignore[return-value]  # set by the first turn


@pytest.mark.parametrize("keep_maps", [False, True])
def test_a_streamed_prioritize_answered_before_its_decode_keeps_no_body(tmp_path, keep_maps):
    """Refused after its body was read (``--require-session`` and a score rule that reads the
    session, no session open: 500 before the decode), the streamed body must not stay behind
    with the worker thread until its next call: with ``keep_body_maps`` off the worker's RSS
    does not keep it; on, the map is given back after each answer (which it is only when
    nothing else refers to it) and the second call is received into it."""
    from bench.generate import Bodies, Cluster, ClusterSpec

    policies = tmp_path / "policies"
    policies.mkdir()
    (policies / "spread.policy").write_text("score spread: 10 - session.node.gpu\n")
    body = Bodies(Cluster(ClusterSpec(nodes=400, pods_per_node=20))).prioritize()
    assert len(body) > 2 * prioritize_stream.STREAM_FROM  # 54 MB: mapped, streamed
    server = Server(tmp_path, policies, workers=1, threads=1, extra_args=(
        "--require-session", "true", "--keep-body-maps", str(keep_maps).lower()))
    try:
        server.wait_ready()
        client = VolcanoClient(server.port, timeout=60)
        before = worker_rss_mb(server.process.pid)
        statuses = [client.raw("prioritize", body)[0] for _ in range(2)]
        after = worker_rss_mb(server.process.pid)
        client.close()
        maps = body_maps(server.port)
    finally:
        server.stop()
    assert statuses == [500, 500]
    if keep_maps:
        assert maps == {"new": 1.0, "kept": 1.0}, maps
    else:
        assert maps == {"new": 2.0}, maps
        assert after - before < len(body) / 1e6 / 2, (before, after)


def test_a_streamed_prioritize_takes_the_nodes_its_tasks_predicates_kept(monkeypatch, tmp_path):
    """Under gunicorn, as in a cycle: the task's predicate on every node, then its prioritize of
    them all (39 MB: mapped and streamed). The worker kept the nodes (``--node-reuse-bytes``
    raised to hold them), so the prioritize takes them by a memcmp while the body arrives
    instead of decoding them; the answer is the one of a prioritize sent before any predicate,
    and the one after a node changed (its idle resources) has that node decoded anew."""
    from bench.generate import Bodies, Cluster, ClusterSpec

    path = tmp_path / "calls.trace"
    monkeypatch.setenv(trace.ENV, str(path))
    cluster = Cluster(ClusterSpec(nodes=200, pods_per_node=30))
    bodies = Bodies(cluster)
    body = bodies.prioritize()
    assert len(body) > 32 << 20, "a mapped body (web/socket_body.MAPPED_FROM)"
    data = orjson.loads(body)
    idle = data["nodes"][7]["Idle"]["ScalarResources"]
    idle["nvidia.com/gpu"] = 7000 if idle["nvidia.com/gpu"] < 5000 else 1000  # same length
    changed = orjson.dumps(data)
    assert len(changed) == len(body)
    server = Server(tmp_path, ROOT / "bench" / "policies", workers=1, threads=2,
                    extra_args=("--node-reuse-bytes", "64MiB"))
    try:
        server.wait_ready()
        client = VolcanoClient(server.port, timeout=60)
        answers = [client.raw("prioritize", body)]
        predicates = [client.raw("predicate", bodies.predicate(i))[0] for i in range(200)]
        answers += [client.raw("prioritize", body), client.raw("prioritize", changed)]
        client.close()
        lines = traced_calls(path, "prioritize", 3)
        maps = body_maps(server.port)
    finally:
        server.stop()
    # nothing the kept nodes hold points into a body: each map is given back and received into again
    assert maps == {"new": 1.0, "kept": 2.0}, maps
    assert predicates == [200] * 200
    assert [status for status, _ in answers] == [200, 200, 200]
    scores = [orjson.loads(answer)["nodeScore"] for _, answer in answers]
    assert len(scores[0]) == 200 and scores[1] == scores[0]
    name = data["nodes"][7]["Name"]
    assert scores[2][name] != scores[0][name], "the changed node is scored from its new bytes"
    assert {k: v for k, v in scores[2].items() if k != name} == {k: v for k, v in scores[0].items() if k != name}
    reused = [line["values"].get("nodes_reused", 0) for line in lines]
    assert reused[0] == 0 and reused[1] == 199 and reused[2] == 198, reused
