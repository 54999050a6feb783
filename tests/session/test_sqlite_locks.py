"""The SQLite store keeps its POSIX locks: nothing in the process closes a descriptor of the
database's files while it has a connection (closing *any* descriptor of a file drops every POSIX
lock the process holds on it, which lets another process truncate the wal-index under the
readers, or take the write lock in the middle of a transaction).

Checked against the kernel's own lock table (/proc/locks) and against other processes.
"""

from __future__ import annotations

import ctypes
import multiprocessing
import os
import sqlite3
import threading

import pytest

from policy_extender.session.allocation import AllocationRecord, encode_allocation
from policy_extender.session.cache import SessionCache
from policy_extender.session.head_watch import HeadWatch
from policy_extender.session.sqlite import SqliteStore

SPAWN = multiprocessing.get_context("spawn")
SNAPSHOT = b"\x82\xa4Jobs\x80\xa6Queues\x80"  # msgpack {"Jobs": {}, "Queues": {}}

pytestmark = pytest.mark.skipif(not os.path.exists("/proc/locks"), reason="needs Linux /proc/locks")


def posix_locks(path: str, pid: int) -> list[str]:
    """The kernel's POSIX lock lines held by ``pid`` on the file at ``path``."""
    inode = os.stat(path).st_ino
    held = []
    with open("/proc/locks") as table:
        for line in table:
            fields = line.split()
            if "->" in fields:  # a waiter: "1: -> POSIX ..."
                continue
            if fields[1] == "POSIX" and int(fields[4]) == pid and int(fields[5].rsplit(":", 1)[1]) == inode:
                held.append(line.strip())
    return held


class FileEvents:
    """inotify IN_MODIFY events of one file: ``ftruncate`` and ``write`` make them, stores to a
    shared mapping (how SQLite writes the wal-index) do not."""

    IN_MODIFY = 0x2

    def __init__(self, path: str) -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        self.fd = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        assert self.fd >= 0 and libc.inotify_add_watch(self.fd, path.encode(), self.IN_MODIFY) >= 0

    def count(self) -> int:
        try:
            return len(os.read(self.fd, 65536)) // 16  # struct inotify_event, no name for a file
        except BlockingIOError:
            return 0

    def close(self) -> None:
        os.close(self.fd)


def record(uid: str) -> bytes:
    return encode_allocation(AllocationRecord(uid, "job", "node-1", {"cpu": 1}))


def test_the_process_keeps_its_wal_index_lock_after_the_head_watch_maps_the_file(tmp_path):
    store = SqliteStore(str(tmp_path / "s.sqlite3"))
    store.open(SNAPSHOT, "v1", {})
    store.head()
    shm = store.path + "-shm"
    before = posix_locks(shm, os.getpid())
    assert before, "a connection in WAL mode holds a read lock on the -shm file (DMS byte)"
    watch = HeadWatch(store)
    watch.head()
    SessionCache(store).env()  # the cache's own watch too
    assert posix_locks(shm, os.getpid()) == before


def watcher(path: str, conn) -> None:
    """A worker that has read the head through the watch, then answers 'head' commands."""
    store = SqliteStore(path)
    cache = SessionCache(store)
    cache.env()
    conn.send("ready")
    while conn.recv() == "head":
        env = cache.env()
        conn.send((env.head.session_id, env.head.seq) if env.open else None)


def opener(path: str) -> None:
    """A new process (a replacement worker, a CLI): opens the file and records a change."""
    store = SqliteStore(path)
    head = store.head()
    assert head is not None
    assert store.allocate(head.session_id, "t-new", record("t-new"))


def open_session(path: str, result) -> None:
    result.put(SqliteStore(path).open(SNAPSHOT, "v1", {}))


@pytest.mark.slow
def test_a_new_process_opening_the_store_does_not_pull_the_wal_index_from_under_a_watcher(tmp_path):
    path = str(tmp_path / "s.sqlite3")
    result = SPAWN.Queue()
    setup = SPAWN.Process(target=open_session, args=(path, result))
    setup.start()
    session = result.get(timeout=30)
    setup.join(30)  # the only process left with the file open is the watcher
    parent, child = SPAWN.Pipe()
    worker = SPAWN.Process(target=watcher, args=(path, child))
    worker.start()
    try:
        assert parent.recv() == "ready"
        events = FileEvents(path + "-shm")
        for _ in range(3):  # each new process would rebuild (truncate) an unlocked wal-index
            newcomer = SPAWN.Process(target=opener, args=(path,))
            newcomer.start()
            newcomer.join(30)
            assert newcomer.exitcode == 0
        modified = events.count()
        events.close()
        assert modified == 0, "a new process truncated and rebuilt the wal-index"
        parent.send("head")
        assert parent.poll(30), f"the watcher died (exit code {worker.exitcode})"
        assert parent.recv() == (session, 3)
    finally:
        parent.send("exit")
        worker.join(30)
    assert worker.exitcode == 0


def try_write(path: str, result) -> None:
    conn = sqlite3.connect(path, timeout=0.3, isolation_level=None)
    try:
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("ROLLBACK")
        result.put("got the write lock")
    except sqlite3.OperationalError as exc:
        result.put(str(exc))


@pytest.mark.slow
def test_a_write_transaction_keeps_its_lock_while_another_thread_first_reads_the_head(tmp_path):
    store = SqliteStore(str(tmp_path / "s.sqlite3"))
    session = store.open(SNAPSHOT, "v1", {})
    inside, finish = threading.Event(), threading.Event()

    def allocate_slowly() -> None:  # thread B: inside an allocate transaction
        with store._write() as conn:
            conn.execute("UPDATE head SET seq = seq + 1")
            conn.execute("INSERT INTO allocation VALUES (?, 'b', 1, '+', ?)", (session, record("b")))
            inside.set()
            finish.wait(30)

    thread = threading.Thread(target=allocate_slowly)
    thread.start()
    try:
        assert inside.wait(30)
        SessionCache(store).env()  # thread A: this process's first watched head read
        result = SPAWN.Queue()
        other = SPAWN.Process(target=try_write, args=(store.path, result))
        other.start()
        other.join(30)
        assert result.get(timeout=5) == "database is locked"
    finally:
        finish.set()
        thread.join(30)
    assert store.head().seq == 1
