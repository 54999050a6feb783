"""Per-request timings (``policy_extender/trace.py``): off unless ``POLICY_EXTENDER_TRACE`` names a file;
on, a real server writes one line per verb call, with the onSessionOpen phases."""

from __future__ import annotations

import io
import json
import time
from pathlib import Path

import pytest

from policy_extender.config import Config
from policy_extender import trace
from policy_extender.web import create_app
from tests.support.volcano import Server, VolcanoClient

ROOT = Path(__file__).resolve().parents[2]


def test_off_by_default_nothing_is_timed(monkeypatch, tmp_path):
    monkeypatch.delenv(trace.ENV, raising=False)
    app = create_app(Config(policy_dirs=(str(ROOT / "bench" / "policies"),), reload_interval=0.0,
                            session_store=f"sqlite:{tmp_path / 's.sqlite3'}"))
    dispatch = app.wsgi_app
    assert dispatch.tracer is None
    assert trace.mark is trace._off and trace.note is trace._off
    response = app.test_client().post("/onSessionOpen", data=b'{"Jobs":{},"Nodes":{},"Queues":{}}',
                                      content_type="application/json")
    assert response.status_code == 200
    assert trace.mark is trace._off, "a call must not turn tracing on"
    app.extensions["policy_extender"].stop()


@pytest.mark.slow
def test_on_a_served_open_and_predicate_are_traced_with_phases(monkeypatch, tmp_path):
    from bench.generate import Bodies, Cluster, ClusterSpec, write_snapshot

    path = tmp_path / "calls.trace"
    monkeypatch.setenv(trace.ENV, str(path))
    cluster = Cluster(ClusterSpec(nodes=50, pods_per_node=20))
    out = io.BytesIO()
    write_snapshot(cluster, out)
    server = Server(tmp_path, ROOT / "bench" / "policies", workers=1, threads=2)
    try:
        server.wait_ready()
        client = VolcanoClient(server.port, timeout=30)
        sent = time.perf_counter()
        assert client.raw("onSessionOpen", out.getvalue())[0] == 200
        assert client.raw("predicate", Bodies(cluster).predicate(0))[0] == 200
        client.close()
        deadline = time.monotonic() + 10
        lines = []
        while time.monotonic() < deadline and len([x for x in lines if x["kind"] == "request"]) < 2:
            time.sleep(0.3)
            lines = [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
    finally:
        server.stop()
    requests = {line["verb"]: line for line in lines if line["kind"] == "request"}
    opened = requests["onSessionOpen"]
    phases = [name for name, _ in opened["phases"]]
    assert phases == ["received", "decoded", "encoded", "stored", "replied"]
    times = [opened["start"], *(t for _, t in opened["phases"]), opened["end"]]
    assert times == sorted(times) and sent <= opened["start"]
    assert opened["values"]["pieces"] > 0, "an 18 MB open is decoded while it arrives"
    assert [name for name, _ in requests["predicate"]["phases"]] == ["received", "replied"]
