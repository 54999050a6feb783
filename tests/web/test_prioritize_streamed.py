"""A served prioritize of many nodes is decoded while it arrives (``wire/prioritize_stream.py``)
and answers exactly what the same call decoded whole answers."""

from __future__ import annotations

import io
import json
import time
from pathlib import Path

import orjson
import pytest

from policy_extender import trace
from policy_extender.wire import prioritize_stream
from tests.web.volcano import Server, VolcanoClient

ROOT = Path(__file__).resolve().parents[2]


def traced(path: Path, count: int) -> list[dict]:
    deadline, lines = time.monotonic() + 10, []
    while time.monotonic() < deadline:
        lines = [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
        lines = [line for line in lines if line["kind"] == "request" and line["verb"] == "prioritize"]
        if len(lines) >= count:
            break
        time.sleep(0.3)
    return lines


@pytest.mark.slow
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
        lines = traced(path, 3)
    finally:
        server.stop()
    assert [status for status, _ in answers] == [200, 200, 200]
    scores = [orjson.loads(body)["nodeScore"] for _, body in answers]
    assert len(scores[0]) == 200 and len(set(scores[0].values())) > 1, "the policy must tell nodes apart"
    assert scores[0] == scores[1] == scores[2]
    pieces = [line["values"].get("pieces", 0) for line in lines]
    assert pieces[0] > 0 and pieces[2] > 0, "a 27 MB compact body is decoded while it arrives"
    assert pieces[1] == 0, "an indented body is not split"
