"""Recording under real gunicorn: two workers share a cycle, each writes its own file, and the
reader merges them into the cycle Volcano sent; replay then finds exactly the expected flips."""

from __future__ import annotations

import json

import pytest

from tests.support.policies import write_policies
from tests.support.recorded import cycle_calls, NODE_ZONES, RECORDED, ZONE_ADDED
from tests.replay.server import RecordingServer
from tests.support.volcano import VolcanoClient

pytestmark = pytest.mark.slow


def test_two_workers_record_one_cycle_that_replays_exactly(tmp_path, replay):
    policies = write_policies(tmp_path / "recorded", RECORDED)
    recording = tmp_path / "recording"
    server = RecordingServer(tmp_path, policies, "--record", str(recording), workers=2)
    client = VolcanoClient(server.port)
    try:
        server.wait_ready()
        calls = cycle_calls()
        for verb, body in calls[:1]:
            client.call(verb, body, fresh=True)
        predicates = [body for verb, body in calls if verb == "predicate"]
        for _ in range(5):  # new connections: the kernel spreads them over both workers
            client.parallel("predicate", predicates, fresh=True)
        for verb, body in calls[1 + len(predicates):]:
            client.call(verb, body, fresh=True)
    finally:
        client.close()
        server.stop()
    [cycle_dir] = [p for p in recording.iterdir() if p.is_dir()]
    assert len(list(cycle_dir.glob("*.rec"))) >= 1
    status, out, _ = replay(recording, "--policies", policies, "--json")
    report = json.loads(out)
    assert status == 0 and report["summary"]["calls"] == 1 + 5 * len(predicates) + 9
    status, out, _ = replay(recording, "--policies", write_policies(tmp_path / "zone", ZONE_ADDED), "--json")
    flips = sorted(c["node"] for c in json.loads(out)["changes"] if c["kind"] == "now unfit")
    other_zones = sorted(n for n, zone in NODE_ZONES.items() if zone != "zone-a")
    assert status == 1 and flips == sorted(other_zones * 5)
