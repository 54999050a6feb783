"""The session store failing under a real gunicorn: a paused Redis, a Redis that restarts empty
in the middle of a cycle, a SQLite file deleted under the workers. Answers are errors (503, so
Volcano's ``extender.ignorable`` decides) while the store cannot give the cycle's session, and
right again from the next onSessionOpen: never a 200 decided with no session or another session."""

from __future__ import annotations

import http.client
import json
import os
import re
import signal
import threading
import time

import pytest

from tests.support.bodies import SAMPLES
from tests.support.policies import write_policies
from tests.support.volcano import RedisServer, Server, VolcanoClient

JOB = "ml/job-002-8379799c-38b5-481a-ad2d-f76627ecc4bd"  # the sample predicate's task's job
POLICIES = {"session.policy": """\
filter in-session: session.open
  reason "no session"
filter small-gang: task.job.min_available < 5
  reason "gang too big"
"""}


def body(verb: str) -> dict:
    return json.loads((SAMPLES / f"{verb}.json").read_bytes())


def open_body(min_available: int) -> dict:
    opened = body("onSessionOpen")
    opened["Jobs"][JOB]["MinAvailable"] = min_available
    return opened


def predicates(port: int, times: int = 48) -> list[tuple[int, str]]:
    """``times`` predicates, 16 at once, each on a new connection (both workers answer)."""
    client = VolcanoClient(port, timeout=10)
    data = json.dumps(body("predicate")).encode()
    try:
        answers = list(client._pool.map(lambda _: client.raw("predicate", data, fresh=True), range(times)))
    finally:
        client.close()
    return [(status, json.loads(answer)["status"].rsplit(": ", 1)[-1] if status == 200 else "")
            for status, answer in answers]


@pytest.fixture
def redis_server(tmp_path):
    server = RedisServer(tmp_path)
    yield server
    server.stop()


@pytest.fixture
def redis_service(tmp_path, redis_server):
    srv = Server(tmp_path, write_policies(tmp_path / "policies", POLICIES), redis_server.url, workers=2)
    try:
        srv.wait_ready()
        yield srv
    finally:
        srv.stop()


def test_a_paused_redis_fails_calls_within_the_redis_timeout_not_volcanos(redis_service, redis_server):
    volcano = VolcanoClient(redis_service.port, timeout=10)
    volcano.call("onSessionOpen", open_body(3))
    assert volcano.call("predicate", body("predicate"))["code"] == 0
    redis_server.pause()
    resume = threading.Timer(4.0, redis_server.resume)  # before the fix a call waited until this
    resume.start()
    try:
        started = time.monotonic()
        status, answer = volcano.raw("predicate", json.dumps(body("predicate")).encode(), fresh=True)
        waited = time.monotonic() - started
    finally:
        resume.cancel()
        redis_server.resume()
    assert status == 503 and b"Timeout" in answer  # unavailable, like a lost session
    assert waited < 1.0  # the default redis_timeout is 0.25 s
    assert volcano.call("predicate", body("predicate"), fresh=True)["code"] == 0
    volcano.close()


def test_a_redis_restarted_empty_mid_cycle_fails_calls_until_the_next_open(redis_service, redis_server):
    volcano = VolcanoClient(redis_service.port, timeout=10)
    volcano.call("onSessionOpen", open_body(3))
    assert predicates(redis_service.port) == [(200, "")] * 48  # both workers hold the session
    redis_server.restart()
    after = predicates(redis_service.port)
    assert {status for status, _ in after} == {503}  # not 48 "no session" rejections
    status, answer = volcano.raw("allocateFunc", json.dumps(body("allocateFunc")).encode(), fresh=True)
    assert status == 503 and b"no session" in answer  # not accepted and dropped
    volcano.call("onSessionOpen", open_body(9))
    assert predicates(redis_service.port) == [(200, "gang too big")] * 48
    assert "vanished from the session store" in redis_service.log()
    volcano.close()


def worker_pids(master: int) -> list[int]:
    with open(f"/proc/{master}/task/{master}/children") as f:
        return [int(pid) for pid in f.read().split()]


def test_a_sqlite_file_deleted_under_the_workers_does_not_split_them(tmp_path):
    path = tmp_path / "sessions.sqlite3"
    srv = Server(tmp_path, write_policies(tmp_path / "policies", POLICIES), f"sqlite:{path}", workers=2)
    try:
        srv.wait_ready()
        volcano = VolcanoClient(srv.port, timeout=10)
        volcano.call("onSessionOpen", open_body(3))
        assert predicates(srv.port) == [(200, "")] * 48
        for suffix in ("", "-wal", "-shm"):  # tmpfs cleaned
            os.remove(f"{path}{suffix}")
        old, survivor = worker_pids(srv.process.pid)
        os.kill(old, signal.SIGKILL)  # its replacement makes a new file
        deadline = time.monotonic() + 20
        while len(set(worker_pids(srv.process.pid)) - {old}) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        srv.wait_ready()
        volcano.call("onSessionOpen", open_body(9), fresh=True)  # the next cycle, on either worker
        assert predicates(srv.port) == [(200, "gang too big")] * 48  # one session, seen by both
        assert survivor in worker_pids(srv.process.pid)
        # "deleted", or "replaced" when the survivor's check came after the new worker made the new
        # file (a loaded machine): either way it noticed and moved to the file the path names
        assert re.search(r"was (deleted|replaced) under this process", srv.log())
        volcano.close()
    finally:
        srv.stop()


def test_a_worker_that_had_not_read_the_lost_session_answers_503_too(redis_service, redis_server):
    """Only the worker that had read the session can tell the store lost it; once it has, the
    instance's other workers, which never read it, answer 503 too instead of deciding without it."""
    one_worker = http.client.HTTPConnection("127.0.0.1", redis_service.port, timeout=10)  # keep-alive
    data = json.dumps(body("predicate")).encode()

    def on_that_worker(verb: str, payload: bytes) -> tuple[int, bytes]:
        one_worker.request("POST", "/" + verb, body=payload, headers={"Content-Type": "application/json"})
        answer = one_worker.getresponse()
        return answer.status, answer.read()

    one_worker.request("GET", "/status")
    runtime_dir = json.loads(one_worker.getresponse().read())["runtime_dir"]
    assert on_that_worker("onSessionOpen", json.dumps(open_body(3)).encode())[0] == 200
    assert on_that_worker("predicate", data) == (200, b'{"status":"","code":0}')  # it read the session
    redis_server.restart()
    status, answer = on_that_worker("predicate", data)
    assert status == 503 and b"vanished" in answer
    after = predicates(redis_service.port)  # on both workers
    assert {status for status, _ in after} == {503}  # the other's were 200 "no session" rejections
    assert "found by another worker or replica" in redis_service.log()
    volcano = VolcanoClient(redis_service.port, timeout=10)
    volcano.call("onSessionOpen", open_body(9))
    assert predicates(redis_service.port) == [(200, "gang too big")] * 48
    assert not os.path.exists(os.path.join(runtime_dir, "session-lost"))
    volcano.close()
    one_worker.close()


def test_a_replica_that_never_read_the_lost_session_answers_503_too(tmp_path, redis_service, redis_server):
    """Two replicas behind one Service share the Redis store; only the first reads the session.
    Redis restarts empty: once the first has found the session lost, it records that in the store
    (``mark_lost``), and the second replica, which never read it and shares no runtime directory
    with the first, answers 503 for the rest of that cycle instead of deciding without it."""
    (tmp_path / "other").mkdir()
    other = Server(tmp_path / "other", write_policies(tmp_path / "other-policies", POLICIES), redis_server.url,
                   workers=2)
    try:
        other.wait_ready()
        volcano = VolcanoClient(redis_service.port, timeout=10)
        volcano.call("onSessionOpen", open_body(3))
        assert predicates(redis_service.port) == [(200, "")] * 48
        redis_server.restart()
        assert {status for status, _ in predicates(redis_service.port)} == {503}
        assert {status for status, _ in predicates(other.port)} == {503}, "the other replica decided without it"
        volcano.call("onSessionOpen", open_body(9))  # the next cycle
        assert predicates(other.port) == predicates(redis_service.port) == [(200, "gang too big")] * 48
        volcano.close()
    finally:
        other.stop()
