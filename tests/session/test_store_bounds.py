"""A store kept open for ever holds a bounded set of policy versions (issue 16 item 4): a policy
swapped every second, each swap a new version pinned by the next open, must not add a version's
files to the store at every open for good."""

from __future__ import annotations

import sqlite3
import uuid

import pytest
import redis

from policy_extender.session.redis import RedisStore
from policy_extender.session.sqlite import SqliteStore

SOURCES = {"gpu.policy": "score 10 * free_gpu\n"}


def open_versions(store, count: int) -> None:
    for n in range(count):
        store.open(b"snapshot", f"v{n}", {"gpu.policy": f"score {n} * free_gpu\n"})


def test_sqlite_keeps_only_the_open_sessions_version(tmp_path):
    path = str(tmp_path / "s.sqlite3")
    store = SqliteStore(path)
    open_versions(store, 200)
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT count(*) FROM policy_version").fetchone()[0] == 1
        assert conn.execute("SELECT count(*) FROM policy_source").fetchone()[0] == 1
    assert store.policy_sources("v199") == {"gpu.policy": "score 199 * free_gpu\n"}
    assert store.policy_sources("v0") is None
    store.close()
    store.open(b"snapshot", "v199", SOURCES)  # reopening on the same version keeps it readable
    assert store.policy_sources("v199") is not None


@pytest.mark.slow
def test_redis_sources_expire_with_the_sessions_that_pin_them(redis_url):
    prefix = "test-" + uuid.uuid4().hex
    store = RedisStore(redis_url, ttl_seconds=30, prefix=prefix)
    open_versions(store, 50)
    client = redis.Redis.from_url(redis_url)
    keys = client.keys("{" + prefix + "}:sources:*")
    assert len(keys) == 50
    ttls = [client.pttl(k) for k in keys]
    assert all(0 < t <= 30_000 for t in ttls), ttls   # none kept for ever (-1)
    store.open(b"snapshot", "v0", {"gpu.policy": "score 0 * free_gpu\n"})  # pinned again: expiry renewed
    assert client.pttl("{" + prefix + "}:sources:v0") > 29_000
    assert store.policy_sources("v0") == {"gpu.policy": "score 0 * free_gpu\n"}
