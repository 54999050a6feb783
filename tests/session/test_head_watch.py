"""HeadWatch: the SQLite store's head re-read only after a commit (by any process) or at expiry,
checked against a writer in another process on the same file, and against the plain query."""

from __future__ import annotations

import multiprocessing
import os
import time

import pytest

from policy_extender.session.allocation import AllocationRecord, encode_allocation
from policy_extender.session.cache import SessionCache
from policy_extender.session.head_watch import HeadWatch, watch_for
from policy_extender.session.sqlite import SqliteStore, session_clock
from tests.support.forking import in_forked_child

SPAWN = multiprocessing.get_context("spawn")
SNAPSHOT = b"\x82\xa4Jobs\x80\xa6Queues\x80"  # msgpack {"Jobs": {}, "Queues": {}}


def writer(path: str, ttl: float, conn) -> None:
    """Another worker: runs the store operations the parent sends, answers when committed."""
    store = SqliteStore(path, ttl_seconds=ttl)
    while (command := conn.recv()) != "exit":
        if command == "open":
            conn.send(store.open(SNAPSHOT, "v1", {"a.policy": "filter a: true\n"}))
        elif command == "allocate":
            head = store.head()
            assert head is not None
            record = encode_allocation(AllocationRecord(f"t{head.seq}", "job", "node-1", {"cpu": 1}))
            conn.send(store.allocate(head.session_id, f"t{head.seq}", record))
        elif command == "close":
            store.close()
            conn.send(None)


@pytest.fixture
def other_process(tmp_path):
    path = str(tmp_path / "sessions.sqlite3")
    SqliteStore(path).head()  # the file exists, in WAL mode, before either side reads it
    started = []

    def start(ttl: float = 300.0):
        parent, child = SPAWN.Pipe()
        process = SPAWN.Process(target=writer, args=(path, ttl, child))
        process.start()
        started.append((process, parent))
        return lambda command: (parent.send(command), parent.recv())[1]  # type: ignore[func-returns-value]  # send() is None: [1] is recv()

    yield path, start
    for process, parent in started:
        parent.send("exit")
        process.join(30)


@pytest.mark.slow
def test_every_commit_of_another_process_is_seen_at_once(other_process):
    path, start = other_process
    run = start()
    store = SqliteStore(path)
    watch, cache = HeadWatch(store), SessionCache(store)
    assert watch.head() is None and cache.env().open is False
    session = run("open")
    for step in range(4):
        assert watch.head() == store.head() and watch.head().session_id == session
        assert cache.env().head.seq == step
        assert run("allocate") is True
    assert watch.head().seq == 4 and cache.env().counters is not None
    run("close")
    assert watch.head() is None and cache.env().open is False


@pytest.mark.slow
def test_unchanged_database_is_not_queried_again(other_process):
    path, start = other_process
    start()("open")
    watch = HeadWatch(SqliteStore(path))
    first = watch.head()
    queries = watch.queries
    assert all(watch.head() is first for _ in range(500))
    assert watch.queries == queries


def test_a_move_to_a_replaced_file_is_seen_at_once(tmp_path):
    """A write that finds the path naming another file moves the store there (its generation
    changes); the very next head() reads the new file, not the answer kept from the old one."""
    path = str(tmp_path / "s.sqlite3")
    store = SqliteStore(path)
    watch = HeadWatch(store)
    first = store.open(SNAPSHOT, "v1", {"a.policy": "filter a: true\n"})
    assert watch.head().session_id == first and watch.head().session_id == first  # kept
    other = str(tmp_path / "other.sqlite3")
    SqliteStore(other).head()
    for suffix in ("", "-wal", "-shm"):  # a volume remounted: the path names another file
        if os.path.exists(other + suffix):
            os.replace(other + suffix, path + suffix)
    opened = store.open(SNAPSHOT, "v2", {"a.policy": "filter a: true\n"})  # noticed by this write
    assert store.replacements == 1
    assert watch.head().session_id == opened


def test_an_answer_names_its_head_and_holds_until_another_connection_commits(tmp_path):
    """The watch's last answer (``HeadAnswer``, by field name) is the head it gave, and holds
    (``HeadWatch.holds``: what the session cache gives its env again under) until a commit by
    any connection to the file; then the next head() reads the new head."""
    path = str(tmp_path / "s.sqlite3")
    store, other = SqliteStore(path), SqliteStore(path)
    session = other.open(SNAPSHOT, "v1", {"a.policy": "filter a: true\n"})
    watch = HeadWatch(store)
    head = watch.head()
    answer = watch.last_answer()
    assert answer.head is head and head.session_id == session and head.seq == 0
    assert answer.valid_from <= session_clock() < answer.valid_until <= answer.expires_at
    assert watch.holds(answer) and watch.head() is head
    record = encode_allocation(AllocationRecord("t0", "job", "node-1", {"cpu": 1}))
    assert other.allocate(session, "t0", record) is True
    assert not watch.holds(answer)
    assert watch.head().seq == 1 and watch.last_answer().head.seq == 1


@pytest.mark.slow
def test_a_forked_child_queries_before_it_answers_from_the_header(tmp_path):
    """A forked worker inherits the watch and its map, but not its parent's locks: its first
    head() queries (so its own connection holds the file open) before it trusts the header."""
    store = SqliteStore(str(tmp_path / "s.sqlite3"))
    watch = HeadWatch(store)
    opened = store.open(SNAPSHOT, "v1", {"a.policy": "filter a: true\n"})
    assert watch.head().session_id == opened

    def child() -> str:
        before = watch.queries
        return f"{watch.head().session_id == opened} {watch.queries - before}"
    assert in_forked_child(child) == "True 1"


@pytest.mark.slow
def test_a_session_expires_without_any_commit(other_process):
    path, start = other_process
    start(ttl=0.4)("open")
    store = SqliteStore(path, ttl_seconds=0.4)
    watch = HeadWatch(store)
    assert watch.head() is not None
    deadline = time.time() + 5
    while (head := watch.head()) is not None and time.time() < deadline:
        assert store.head() is not None or time.time() >= head.opened_at + 0.4
    assert watch.head() is None and store.head() is None


def test_other_stores_are_queried_every_call():
    class NotSqlite:
        path = "/nonexistent"
    assert watch_for(NotSqlite()) is None


def test_a_missing_shm_file_falls_back_to_querying(tmp_path):
    class Store:
        path, ttl_seconds, calls, generation = str(tmp_path / "none.sqlite3"), 300.0, 0, 0

        def check_file(self):
            return True

        def head(self):
            Store.calls += 1
            return None
    watch = HeadWatch(Store())
    for _ in range(3):
        assert watch.head() is None
    assert watch.queries == 3


# -- SessionCache.env: the watch's test on the watch's last answer, without calling the watch ------


def counting_watch(cache: SessionCache) -> list[int]:
    """Count the calls of ``cache``'s watch: [calls]."""
    calls, head = [0], cache._watch.head

    def counted():
        calls[0] += 1
        return head()
    cache._watch.head = counted
    return calls


@pytest.mark.slow
def test_the_cache_gives_its_env_again_until_another_process_commits(other_process):
    path, start = other_process
    run = start()
    store = SqliteStore(path)
    cache = SessionCache(store)
    calls = counting_watch(cache)
    assert cache.env().open is False
    run("open")
    for step in range(3):
        env = cache.env()
        assert env.head.seq == step and env.head == store.head()
        before = calls[0]
        assert all(cache.env() is env for _ in range(200))
        assert calls[0] == before  # answered without the watch
        assert run("allocate") is True
        assert cache.env().head.seq == step + 1  # the very next call
    run("close")
    assert cache.env().open is False and store.head() is None


def test_the_cache_reads_a_replaced_file_at_once(tmp_path):
    path = str(tmp_path / "s.sqlite3")
    store = SqliteStore(path)
    cache = SessionCache(store)
    first = store.open(SNAPSHOT, "v1", {"a.policy": "filter a: true\n"})
    assert cache.env().head.session_id == first and cache.env().head.session_id == first
    other = str(tmp_path / "other.sqlite3")
    SqliteStore(other).head()
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(other + suffix):
            os.replace(other + suffix, path + suffix)
    opened = store.open(SNAPSHOT, "v2", {"a.policy": "filter a: true\n"})
    assert store.replacements == 1
    assert cache.env().head.session_id == opened


@pytest.mark.slow
def test_a_forked_child_reads_through_the_watch_before_it_answers_from_the_kept_env(tmp_path):
    store = SqliteStore(str(tmp_path / "s.sqlite3"))
    cache = SessionCache(store)
    opened = store.open(SNAPSHOT, "v1", {"a.policy": "filter a: true\n"})
    assert cache.env().head.session_id == opened and cache.env().head.session_id == opened
    calls = counting_watch(cache)
    assert in_forked_child(lambda: f"{cache.env().head.session_id == opened} {calls[0]}") == "True 1"


@pytest.mark.slow
def test_the_cache_sees_a_session_expire_without_any_commit(other_process):
    path, start = other_process
    start(ttl=0.4)("open")
    store = SqliteStore(path, ttl_seconds=0.4)
    cache = SessionCache(store)
    assert cache.env().open is True
    deadline = time.time() + 5
    while (env := cache.env()).open and time.time() < deadline:
        assert store.head() is not None or time.time() >= env.head.opened_at + 0.4
    assert cache.env().open is False and store.head() is None
