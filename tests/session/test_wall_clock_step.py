"""A wall-clock step past ``session_ttl`` in the middle of a cycle is not an expiry: a worker
whose wall clock jumped 400 s ahead (TTL 300 s) still reads the cycle's session, and one that had
read it keeps it, never taking it for ended (and deciding without it). The SQLite store measures
expiry on the host's boot clock; Redis on its own; the cache asks the store (tests/session/wall_clock.py
steps a real process's wall clock with a preload library)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from policy_extender.session.sqlite import SqliteStore

from .cluster import SOURCES, encode_snapshot
from .test_store_failures import record
from .wall_clock import step, stepped_clock_env

pytestmark = pytest.mark.slow  # starts a process

WORKER = """
import json, sys, time
from tests.session.test_store_failures import cache_of
from policy_extender.session.factory import open_store
store = open_store(sys.argv[1], ttl_seconds=300.0)
cache = cache_of(store)
before = time.time()
env = cache.env()                      # reads the session, wall clock as it is
print(json.dumps([env.head.session_id, env.counters.total.tasks]), flush=True)
sys.stdin.readline()                   # the test steps the wall clock now
env = cache.env()
print(json.dumps([time.time() - before, env.open and env.head.session_id, store.ended(sys.argv[2])]), flush=True)
fresh = cache_of(open_store(sys.argv[1], ttl_seconds=300.0)).env()  # a worker that reads it only now
print(json.dumps([fresh.open and fresh.head.session_id, fresh.open and fresh.counters.total.tasks]), flush=True)
"""


@pytest.mark.parametrize("kind", ["sqlite", "redis"])
def test_a_wall_clock_step_past_the_ttl_is_not_an_expiry(kind, tmp_path, request):
    setting = (f"sqlite:{tmp_path / 's.sqlite3'}" if kind == "sqlite"
               else request.getfixturevalue("redis_setting"))
    from policy_extender.session.factory import open_store
    store = open_store(setting, ttl_seconds=300.0)
    if kind == "sqlite":
        assert isinstance(store, SqliteStore)
    session_id = store.open(encode_snapshot(), "v1", SOURCES)
    assert store.allocate(session_id, "t1", record("t1"))
    clock = tmp_path / "wall-clock-offset"
    env = {**os.environ, **stepped_clock_env(clock), "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    worker = subprocess.Popen([sys.executable, "-c", WORKER, setting, session_id], env=env, text=True,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert json.loads(worker.stdout.readline()) == [session_id, 1]
        step(clock, 400)
        worker.stdin.write("\n")
        worker.stdin.flush()
        stepped, seen, ended = json.loads(worker.stdout.readline())
        assert stepped >= 400  # the worker's wall clock did jump past the TTL
        assert (seen, ended) == (session_id, False)
        assert json.loads(worker.stdout.readline()) == [session_id, 1]
    finally:
        worker.kill()
        worker.wait()
