"""A late onSessionOpen under real gunicorn: it arrives, Volcano gives up on it (its
``httpTimeout``), closes the cycle and opens the next one, which is stored and counts three
allocations, all while the late open is still being decoded and stored. Two ``serve`` instances
share a real Redis (as replicas behind one Service do), the late open on one, the next cycle on
the other, so the race is the same on every run. The late open must not replace the next cycle's
session: it is answered 409, nothing of it is stored, the next cycle's allocations stay counted,
and the late open is counted as superseded and late.
"""

from __future__ import annotations

import json
import threading
import time

import pytest
import redis

from tests.support.bodies import SAMPLES
from tests.support.policies import write_policies
from tests.support.volcano import RedisServer, Server, VolcanoClient

JOB = "ml/job-002-8379799c-38b5-481a-ad2d-f76627ecc4bd"  # the sample prioritize's task's job
#: every node scores 1000 per task allocated in the cycle plus the task's job's gang size
POLICIES = {"count.policy": "score session.allocated.tasks * 1000 + task.job.min_available\n"}
#: extra jobs in the late open's snapshot: about 50 KB each, so the open takes seconds to decode and store
EXTRA_JOBS = 6000


def body(verb: str) -> dict:
    return json.loads((SAMPLES / f"{verb}.json").read_bytes())


def open_body(min_available: int, extra_jobs: int = 0) -> bytes:
    opened = body("onSessionOpen")
    opened["Jobs"][JOB]["MinAvailable"] = min_available
    template = next(job for uid, job in opened["Jobs"].items() if uid != JOB)
    for n in range(extra_jobs):
        opened["Jobs"][f"late/job-{n}"] = {**template, "UID": f"late/job-{n}", "Name": f"job-{n}"}
    return json.dumps(opened, indent=1).encode()


def allocate_body(n: int) -> bytes:
    event = body("allocateFunc")
    event["task"]["UID"] = f"late-open-task-{n}"
    return json.dumps(event).encode()


def scores(client: VolcanoClient) -> set:
    status, answer = client.raw("prioritize", json.dumps(body("prioritize")).encode(), fresh=True)
    assert status == 200, answer
    return set(json.loads(answer)["nodeScore"].values())


@pytest.fixture
def redis_server(tmp_path):
    server = RedisServer(tmp_path)
    yield server
    server.stop()


def test_an_open_volcano_gave_up_on_never_replaces_the_next_cycles_session(tmp_path, redis_server):
    policies = write_policies(tmp_path / "policies", POLICIES)
    late_body = open_body(3, EXTRA_JOBS)
    servers = [Server(tmp_path, policies, redis_server.url, workers=1, threads=4,
                      extra_args=("--volcano-timeout", "0.2")) for _ in range(2)]
    store = redis.Redis.from_url(redis_server.url)
    try:
        for server in servers:
            server.wait_ready()
        first, second = (VolcanoClient(server.port, timeout=60) for server in servers)
        issued = int(store.hget("{policy-extender}:arrival", "issued") or 0)

        late_answer: list = []
        late = threading.Thread(target=lambda: late_answer.append(first.raw("onSessionOpen", late_body, fresh=True)))
        late.start()
        deadline = time.monotonic() + 30  # until its arrival is noted in the store (its ticket)
        while int(store.hget("{policy-extender}:arrival", "issued") or 0) == issued:
            assert time.monotonic() < deadline, "the late open's arrival was never noted"
            time.sleep(0.005)

        # Volcano gave up on it: the cycle's close, then the next cycle, on the other instance
        assert second.raw("onSessionClose", b"{}", fresh=True)[0] == 200
        assert second.raw("onSessionOpen", open_body(7), fresh=True)[0] == 200
        for n in range(3):
            assert second.raw("allocateFunc", allocate_body(n), fresh=True)[0] == 200
        assert scores(second) == {3 * 1000 + 7}
        assert late_answer == [], ("the late open answered before the next cycle was stored: the race "
                                   "was not made (make EXTRA_JOBS larger)")
        late.join(60)
        status, answer = late_answer[0]
        assert status == 409, answer
        assert b"not stored" in answer

        assert scores(first) == scores(second) == {3 * 1000 + 7}  # the next cycle's session, on both
        # said at WARNING where policy_extender_session_open_late_total and
        # policy_extender_sessions_total{event="superseded"} count it
        assert "longer than volcano_timeout 0.200 s, and was not stored" in servers[0].log()
        first.close()
        second.close()
    finally:
        store.close()
        for server in servers:
            server.stop()
