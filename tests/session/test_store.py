"""The behaviour every SessionStore shares: run against SQLite and a real redis-server."""

from __future__ import annotations

import pickle
import threading
import time


SNAPSHOT = b"\x83\xa4Jobs\x00\xff binary snapshot \x00"
SOURCES = {"zone.policy": "filter node.labels.zone == task.annotations.zone\n",
           "gpu.policy": "score 10 * free_gpu\n"}


def test_no_session_before_the_first_open(make_store):
    store = make_store()
    assert store.head() is None
    assert store.snapshot("nope") is None
    assert store.allocations("nope") == []
    assert store.allocate("nope", "task-1", b"r") is False
    assert store.deallocate("nope", "task-1", b"r") is False


def test_open_publishes_head_snapshot_and_policy_sources(make_store):
    store, before = make_store(), time.time()
    session_id = store.open(SNAPSHOT, "v1", SOURCES)
    head = store.head()
    assert (head.session_id, head.seq, head.policy_version) == (session_id, 0, "v1")
    assert before <= head.opened_at <= time.time()
    assert store.snapshot(session_id) == SNAPSHOT
    assert store.policy_sources("v1") == SOURCES


def test_another_store_on_the_same_data_sees_the_session(make_store):
    opener, reader = make_store(), make_store()
    session_id = opener.open(SNAPSHOT, "v1", SOURCES)
    assert reader.head().session_id == session_id
    assert reader.snapshot(session_id) == SNAPSHOT


def test_policy_sources_are_stored_once_per_version(make_store):
    store = make_store()
    store.open(b"", "empty", {})
    assert store.policy_sources("empty") == {}
    store.open(b"", "v1", SOURCES)
    store.open(b"", "v1", {"other.policy": "changed"})  # same version hash: never rewritten
    assert store.policy_sources("v1") == SOURCES
    assert store.policy_sources("unknown") is None
    # older versions are not kept for good (tests/session/test_store_bounds.py)


def test_allocate_inserts_or_replaces_and_deallocate_removes(make_store):
    store = make_store()
    session_id = store.open(SNAPSHOT, "v1", SOURCES)
    assert store.allocate(session_id, "task-1", b"first")
    assert store.allocate(session_id, "task-1", b"retried")  # a retried event replaces
    assert store.allocate(session_id, "task-2", b"two")
    assert sorted(store.allocations(session_id)) == [(1, b"retried"), (1, b"two")]
    assert store.deallocate(session_id, "task-1", b"retried")
    assert store.deallocate(session_id, "task-1", b"retried")  # a retried deallocate changes nothing
    assert store.allocations(session_id) == [(1, b"two")]


def test_changes_list_the_events_after_a_seq(make_store):
    store = make_store()
    session_id = store.open(SNAPSHOT, "v1", SOURCES)
    store.allocate(session_id, "task-1", b"one\x00binary")
    store.allocate(session_id, "task-2", b"")
    store.deallocate(session_id, "task-3", b"evicted")  # running before the cycle: -1
    store.deallocate(session_id, "task-1", b"one\x00binary")
    events = [("task-1", 1, b"one\x00binary"), ("task-2", 1, b""), ("task-3", -1, b"evicted"),
              ("task-1", 0, b"one\x00binary")]
    assert store.head().seq == 4
    changes = store.changes(session_id, 0)
    assert [change[:3] for change in changes] == events
    assert len({change.tip for change in changes}) == 4 and store.head().tip == changes[-1].tip
    assert store.changes(session_id, 2) == changes[2:]
    assert store.changes(session_id, 4) == []
    store.open(SNAPSHOT, "v1", SOURCES)
    assert store.changes(session_id, 0) == []


def test_every_change_bumps_seq_and_a_no_op_does_not(make_store):
    store = make_store()
    session_id = store.open(SNAPSHOT, "v1", SOURCES)
    seqs = [store.head().seq]
    for change in (lambda: store.allocate(session_id, "t", b"a"),
                   lambda: store.allocate(session_id, "t", b"b"),
                   lambda: store.deallocate(session_id, "t", b"b")):
        change()
        seqs.append(store.head().seq)
    store.deallocate(session_id, "t", b"b")
    assert seqs == [0, 1, 2, 3]
    assert store.head().seq == 3


def test_a_new_open_replaces_the_session_and_drops_its_allocations(make_store):
    store = make_store()
    old = store.open(b"old", "v1", SOURCES)
    store.allocate(old, "task-1", b"r")
    new = store.open(b"new", "v2", {})
    assert new != old
    assert store.head()[:3] == (new, 0, "v2")
    assert store.snapshot(old) is None
    assert store.snapshot(new) == b"new"
    assert store.allocations(old) == []
    assert store.allocations(new) == []


def test_late_events_of_a_replaced_session_are_refused(make_store):
    store = make_store()
    old = store.open(b"old", "v1", SOURCES)
    new = store.open(b"new", "v1", SOURCES)
    assert store.allocate(old, "task-1", b"late") is False
    assert store.deallocate(old, "task-1", b"late") is False
    assert store.allocations(new) == []
    assert store.head().seq == 0


def test_close_ends_the_session(make_store):
    store = make_store()
    session_id = store.open(SNAPSHOT, "v1", SOURCES)
    store.allocate(session_id, "task-1", b"r")
    store.close()
    assert store.head() is None
    assert store.snapshot(session_id) is None
    assert store.allocations(session_id) == []
    assert store.allocate(session_id, "task-2", b"r") is False
    store.close()  # a second close is harmless
    assert store.policy_sources("v1") == SOURCES  # versions outlive sessions


def test_a_session_never_closed_expires_after_the_ttl(make_store):
    store = make_store(ttl_seconds=0.3)
    session_id = store.open(SNAPSHOT, "v1", SOURCES)
    store.allocate(session_id, "task-1", b"r")
    assert store.head() is not None
    time.sleep(0.5)
    assert store.head() is None
    assert store.snapshot(session_id) is None
    assert store.allocations(session_id) == []
    assert store.changes(session_id, 0) == []
    assert store.allocate(session_id, "task-2", b"r") is False


def test_sessions_are_counted_by_how_they_ended(make_store):
    store = make_store(ttl_seconds=0.3)
    store.open(b"", "v1", {})
    store.close()
    store.open(b"", "v1", {})
    store.open(b"", "v1", {})  # replaces the previous one
    time.sleep(0.5)
    store.open(b"", "v1", {})  # notices the previous one expired
    counts = store.session_counts()
    assert (counts.opened, counts.closed, counts.replaced, counts.expired) == (4, 1, 1, 1)


def test_a_store_survives_pickling_for_spawned_processes(make_store):
    store = make_store()
    session_id = store.open(SNAPSHOT, "v1", SOURCES)
    copy = pickle.loads(pickle.dumps(store))
    assert copy.head().session_id == session_id
    assert copy.snapshot(session_id) == SNAPSHOT


def test_concurrent_threads_lose_no_event(make_store):
    store = make_store()
    session_id = store.open(SNAPSHOT, "v1", SOURCES)

    def send(thread: int) -> None:
        for i in range(50):
            uid = f"t{thread}-{i}"
            store.allocate(session_id, uid, uid.encode())
            store.allocate(session_id, "shared", b"shared")
            if i % 5 == 0:
                store.deallocate(session_id, uid, uid.encode())

    threads = [threading.Thread(target=send, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(store.allocations(session_id)) == 8 * 40 + 1
    assert store.head().seq == 8 * (50 + 50 + 10)
    assert len(store.changes(session_id, 0)) == store.head().seq
