"""A served onSessionOpen takes the nodes its worker's predicates kept and the jobs its last open
decoded (``wire/open_stream.py``), and stores exactly the snapshot the whole decode stores."""

from __future__ import annotations

import io
import sqlite3
from pathlib import Path

import orjson

from policy_extender import trace
from policy_extender.wire import open_stream
from tests.support.volcano import Server, VolcanoClient, traced_calls

ROOT = Path(__file__).resolve().parents[2]


def stored_snapshot(store: Path) -> bytes:
    """The pruned snapshot of the session the store's head points at."""
    with sqlite3.connect(store) as db:
        (session,) = db.execute("SELECT session_id FROM head").fetchone()
        (data,) = db.execute("SELECT data FROM snapshot WHERE session_id = ?", (session,)).fetchone()
    return bytes(data)


def test_an_open_after_predicates_and_another_open_stores_what_the_whole_decode_stores(monkeypatch, tmp_path):
    from bench.generate import Bodies, Cluster, ClusterSpec, write_snapshot

    path = tmp_path / "calls.trace"
    monkeypatch.setenv(trace.ENV, str(path))
    cluster = Cluster(ClusterSpec(nodes=50, pods_per_node=20))
    out = io.BytesIO()
    write_snapshot(cluster, out)
    compact = out.getvalue()
    indented = orjson.dumps(orjson.loads(compact), option=orjson.OPT_INDENT_2)  # not split: decoded whole
    jobs = compact.count(b'","PgUID":')
    assert len(compact) > open_stream.STREAM_FROM and jobs > 10
    store = tmp_path / "sessions.sqlite"
    server = Server(tmp_path, ROOT / "bench" / "policies", session_store=f"sqlite:{store}", workers=1, threads=2)
    try:
        server.wait_ready()
        client = VolcanoClient(server.port, timeout=30)
        stored = []
        for body in (indented, None, compact, compact):
            if body is None:  # the cycle's predicates: every node, kept by the one worker
                assert {client.raw("predicate", p)[0] for p in Bodies(cluster).predicates(p=0)} == {200}
                continue
            assert client.raw("onSessionOpen", body)[0] == 200
            stored.append(stored_snapshot(store))
            assert client.raw("onSessionClose", b"{}")[0] == 200
        client.close()
        lines = traced_calls(path, "onSessionOpen", 3)
    finally:
        server.stop()
    assert stored[0] == stored[1] == stored[2], "the snapshot stored is the whole decode's"
    taken = [(line["values"].get("nodes_reused", 0), line["values"].get("jobs_reused", 0)) for line in lines]
    assert taken[0] == (0, 0), "an indented body is decoded whole"
    assert taken[1] == (50, 0), "every node, from the predicates; no job kept yet"
    assert taken[2] == (50, jobs), "and every job, from the open before"
