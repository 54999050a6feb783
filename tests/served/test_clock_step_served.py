"""A wall-clock step past ``session_ttl`` in the middle of a cycle, under real gunicorn: the
service's wall clock (master and both workers; a preload library, the machine's clock left alone) jumps
400 s ahead with a TTL of 300 s. The cycle's session is still the session on every worker: the
predicates decide with it, none answers as if no session were open."""

from __future__ import annotations

import json

import pytest

from tests.session.wall_clock import step, stepped_clock_env
from tests.support.bodies import SAMPLES
from tests.support.policies import write_policies
from tests.support.volcano import Server, VolcanoClient

JOB = "ml/job-002-8379799c-38b5-481a-ad2d-f76627ecc4bd"  # the sample predicate's task's job
POLICIES = {"session.policy": """\
filter in-session: session.open
  reason "no session"
filter small-gang: task.job.min_available < 5
  reason "gang too big"
"""}


def open_body(min_available: int) -> bytes:
    opened = json.loads((SAMPLES / "onSessionOpen.json").read_bytes())
    opened["Jobs"][JOB]["MinAvailable"] = min_available
    return json.dumps(opened).encode()


def predicates(client: VolcanoClient, times: int = 24) -> set[tuple[int, str]]:
    data = (SAMPLES / "predicate.json").read_bytes()
    answers = client.parallel_map(lambda _: client.raw("predicate", data, fresh=True), range(times))
    return {(status, json.loads(answer).get("status", "").rsplit(": ", 1)[-1] if status == 200 else "")
            for status, answer in answers}


@pytest.mark.parametrize("store", ["default", "path"])
def test_a_wall_clock_step_past_the_ttl_mid_cycle_keeps_the_session(tmp_path, monkeypatch, store):
    clock = tmp_path / "wall-clock-offset"
    for name, value in stepped_clock_env(clock).items():
        monkeypatch.setenv(name, value)
    server = Server(tmp_path, write_policies(tmp_path / "policies", POLICIES),
                    None if store == "default" else f"sqlite:{tmp_path / 'sessions.sqlite3'}", workers=2,
                    extra_args=("--session-ttl", "300"), instance_defaults=store == "default")
    try:
        server.wait_ready()
        client = VolcanoClient(server.port, timeout=30)
        assert client.raw("onSessionOpen", open_body(7), fresh=True)[0] == 200
        assert predicates(client) == {(200, "gang too big")}
        step(clock, 400)
        assert predicates(client) == {(200, "gang too big")}, "a wall-clock step ended the session"
        assert client.raw("onSessionClose", b"{}", fresh=True)[0] == 200
        assert predicates(client) == {(200, "no session")}
        client.close()
    finally:
        server.stop()
