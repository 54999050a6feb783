"""A worker never decides from a session the store no longer holds, nor from a history the store
does not have: a store emptied under a running cycle, a Redis failover that lost acknowledged
writes, a session that ends between two reads, an error half-way through catching up, and a
SQLite file deleted or replaced under the workers."""

from __future__ import annotations

import os
import time

import pytest

from policy_extender.session import SessionCache, decode_allocation, encode_allocation
from policy_extender.session.allocation import AllocationRecord
from policy_extender.session.lost import LOST_FILE, LostMarker
from policy_extender.session.redis import RedisStore
from policy_extender.session.sqlite import CHECK_SECONDS, SqliteStore
from policy_extender.session.store import SessionLost

from .cluster import SOURCES, decode_snapshot, encode_snapshot


def record(uid: str, node: str = "node-a") -> bytes:
    return encode_allocation(AllocationRecord(uid, "job-0", node, {"nvidia.com/gpu": 1.0}))


def cache_of(store, **kwargs):
    return SessionCache(store, decode_snapshot, kwargs.pop("decode", decode_allocation), **kwargs)


def wipe(store) -> None:
    """What a store that restarted empty holds: nothing."""
    if isinstance(store, RedisStore):
        store._redis.flushdb()
    else:
        with store._write() as conn:
            for table in ("head", "snapshot", "allocation", "change", "ended", "session_count", "arrival"):
                conn.execute(f"DELETE FROM {table}")


def test_a_session_that_vanished_from_the_store_is_an_error_until_the_next_open(make_store):
    store, events = make_store(), []
    cache = cache_of(store, on_event=events.append)
    session_id = store.open(encode_snapshot(), "v1", SOURCES)
    store.allocate(session_id, "t1", record("t1"))
    assert cache.env().counters.total.tasks == 1
    wipe(store)
    for _ in range(2):
        with pytest.raises(SessionLost, match=f"session {session_id} vanished"):
            cache.env()
    assert events == ["lost", "lost"] and cache.counts.lost == 2
    assert store.allocate(session_id, "t2", record("t2")) is False  # the event handler answers 503
    store.open(encode_snapshot(), "v1", SOURCES)
    assert cache.env().open is True and cache.env().counters.total.tasks == 0


def test_a_lost_session_is_an_error_for_the_workers_that_never_read_it_too(make_store, tmp_path):
    marker = LostMarker(str(tmp_path / LOST_FILE))  # the instance's runtime directory
    store = make_store()
    reader = cache_of(store, lost_marker=marker)  # a worker that read the session
    other = cache_of(make_store(), lost_marker=marker)  # a worker of the same instance that did not
    alone = cache_of(make_store())  # a worker of another instance that did not
    session_id = store.open(encode_snapshot(), "v1", SOURCES)
    assert reader.env().open is True
    wipe(store)
    assert alone.env().open is False  # nobody told it: decided as with no session
    with pytest.raises(SessionLost, match="vanished"):
        reader.env()
    for _ in range(2):
        with pytest.raises(SessionLost, match=f"session {session_id} vanished .* another worker"):
            other.env()
    assert marker.lost() == session_id
    store.open(encode_snapshot(), "v1", SOURCES)  # the next cycle, opened through another instance
    assert other.env().open is True and marker.lost() is None  # the first to load it removes the marker
    assert reader.env().open is True


def test_a_marker_left_behind_holds_no_longer_than_the_lost_session_would_have(tmp_path):
    marker = LostMarker(str(tmp_path / LOST_FILE))
    marker.mark("s1", time.time() + 0.2)
    assert marker.lost() == "s1"
    time.sleep(0.25)
    assert marker.lost() is None
    marker.clear()
    marker.clear()  # twice: nothing to remove is fine


@pytest.mark.parametrize("ending", ["close", "replace", "expire"])
def test_a_session_that_ended_is_no_session_not_an_error(make_store, ending):
    store = make_store(ttl_seconds=0.3 if ending == "expire" else 300)
    cache = cache_of(store)
    store.open(encode_snapshot(), "v1", SOURCES)
    assert cache.env().open is True
    if ending == "close":
        store.close()
    elif ending == "replace":  # another scheduler's open, then its close
        store.open(encode_snapshot(), "v1", SOURCES)
        store.close()
    else:
        import time
        time.sleep(0.45)
    assert cache.env().open is False
    assert cache.counts.lost == 0


def test_a_session_closed_between_head_and_changes_is_not_half_applied(make_store):
    store = make_store()
    cache = cache_of(store)
    session_id = store.open(encode_snapshot(), "v1", SOURCES)
    cache.env()
    for n in range(3):
        store.allocate(session_id, f"t{n}", record(f"t{n}"))
    real_changes = store.changes

    def changes_after_a_close(*args):
        store.close()  # the scheduler closed the session in between
        return real_changes(*args)

    store.changes = changes_after_a_close
    env = cache.env()
    store.changes = real_changes
    assert env.open is False  # not an env that claims seq 3 with none of the 3 events


def test_an_error_while_catching_up_applies_nothing(make_store):
    store, failures = make_store(), []

    def decode_failing_once(data: bytes):
        decoded = decode_allocation(data)
        if decoded.task_uid == "t2" and not failures:
            failures.append(decoded)
            raise ValueError("a record this worker cannot read yet")
        return decoded

    cache = cache_of(store, decode=decode_failing_once)
    session_id = store.open(encode_snapshot(), "v1", SOURCES)
    cache.env()
    store.allocate(session_id, "t1", record("t1"))
    store.allocate(session_id, "t2", record("t2"))
    with pytest.raises(ValueError):
        cache.env()
    counters = cache.env().counters
    assert (counters.total.tasks, counters.by_node["node-a"].tasks) == (2, 2)


def redis_state(store: RedisStore, session_id: str) -> dict:
    keys = [store._key + name for name in ("head", "alloc:" + session_id, "log:" + session_id)]
    return {key: (store._redis.dump(key), store._redis.pttl(key)) for key in keys}


def restore(store: RedisStore, state: dict) -> None:
    """What a replica promoted by a failover holds: the state it had replicated so far."""
    for key, (dumped, ttl) in state.items():
        store._redis.restore(key, max(ttl, 0), dumped, replace=True)


@pytest.fixture
def redis_store(redis_url):
    import uuid
    return RedisStore(redis_url, prefix="failover-" + uuid.uuid4().hex)


@pytest.mark.slow
def test_a_failover_that_lost_the_last_write_is_noticed_when_a_new_write_comes(redis_store):
    store = redis_store
    cache, events = None, []
    cache = cache_of(store, on_event=events.append)
    session_id = store.open(encode_snapshot(), "v1", SOURCES)
    store.allocate(session_id, "t1", record("t1"))
    replicated = redis_state(store, session_id)
    store.allocate(session_id, "t2", record("t2", "node-b"))  # acknowledged, then lost
    assert set(cache.env().counters.by_node) == {"node-a", "node-b"}
    restore(store, replicated)
    store.allocate(session_id, "t3", record("t3", "node-c"))  # same seq as the lost t2
    counters = cache.env().counters
    assert set(counters.by_node) == {"node-a", "node-c"}  # what the store holds, as every worker sees
    assert events == ["resynced"]


@pytest.mark.slow
def test_a_failover_that_lost_the_last_write_is_noticed_without_a_new_write(redis_store):
    store = redis_store
    cache = cache_of(store)
    session_id = store.open(encode_snapshot(), "v1", SOURCES)
    store.allocate(session_id, "t1", record("t1"))
    replicated = redis_state(store, session_id)
    store.allocate(session_id, "t2", record("t2", "node-b"))
    assert cache.env().counters.total.tasks == 2
    restore(store, replicated)
    assert cache.env().counters.total.tasks == 1
    assert cache.counts.resyncs == 1


def test_an_older_head_read_by_a_slower_thread_is_not_a_divergence(make_store):
    store = make_store()
    cache = cache_of(store)
    session_id = store.open(encode_snapshot(), "v1", SOURCES)
    store.allocate(session_id, "t1", record("t1"))
    old_head = store.head()
    store.allocate(session_id, "t2", record("t2"))
    assert cache.env().counters.total.tasks == 2
    assert cache._refresh(old_head).counters.total.tasks == 2
    assert cache.counts.resyncs == 0


def test_a_deleted_sqlite_file_is_noticed_and_the_workers_move_to_the_new_one(tmp_path):
    path = str(tmp_path / "s.sqlite3")
    old_worker = SqliteStore(path)
    cache = cache_of(old_worker)
    session_id = old_worker.open(encode_snapshot(), "v1", SOURCES)
    assert cache.env().head.session_id == session_id
    for suffix in ("", "-wal", "-shm"):  # tmpfs cleaned
        os.remove(path + suffix)
    new_worker = SqliteStore(path)  # a worker started afterwards makes a new file
    assert new_worker.head() is None
    time.sleep(CHECK_SECONDS + 0.05)  # the old worker looks at the path at least this often
    with pytest.raises(SessionLost):  # its session is gone: an error, not "no session"
        cache.env()
    assert old_worker.replacements == 1
    opened = new_worker.open(encode_snapshot(), "v1", SOURCES)
    assert cache.env().head.session_id == opened  # both agree again
    assert old_worker.allocate(opened, "t1", record("t1"))
    assert new_worker.allocations(opened) != []


def test_a_replaced_sqlite_file_is_noticed_on_the_next_write(tmp_path):
    path = str(tmp_path / "s.sqlite3")
    old_worker = SqliteStore(path)
    old_worker.open(encode_snapshot(), "v1", SOURCES)
    other = tmp_path / "other.sqlite3"
    SqliteStore(str(other)).head()
    os.replace(other, path)  # a volume remounted: the path names another file
    for suffix in ("-wal", "-shm"):
        if os.path.exists(str(other) + suffix):
            os.replace(str(other) + suffix, path + suffix)
    opened = old_worker.open(encode_snapshot(), "v2", SOURCES)  # the open goes to the new file
    assert old_worker.replacements == 1
    assert SqliteStore(path).head().session_id == opened
