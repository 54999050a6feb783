"""instance.py: owner records (flock), the private runtime directory, stale sweeps, and start()."""

from __future__ import annotations

import multiprocessing
import os
import signal
import sqlite3
import stat
import subprocess
import sys

import pytest

from policy_extender import instance
from policy_extender.config import Config
from policy_extender.instance import OwnerLock, StoreInUse

FORK = multiprocessing.get_context("fork")


def _hold(path: str, guarded: str, ready, done) -> None:
    OwnerLock(path).acquire(guarded)
    ready.set()
    done.wait(30)


@pytest.fixture
def holder():
    """``holder(path)``: another process that takes the owner lock at ``path`` and keeps it."""
    processes = []

    def start(path: str, guarded: str = "the store"):
        ready, done = FORK.Event(), FORK.Event()
        process = FORK.Process(target=_hold, args=(path, guarded, ready, done))
        process.start()
        assert ready.wait(10)
        processes.append((process, done))
        return process

    yield start
    for process, done in processes:
        if process.is_alive():  # a killed holder may have died inside the event: never notify it
            done.set()
        process.join(10)


@pytest.mark.slow
def test_a_live_owner_is_refused_with_its_pid_start_time_and_command(tmp_path, holder):
    store = str(tmp_path / "s.sqlite3")
    other = holder(store + ".owner", store)
    with pytest.raises(StoreInUse) as refused:
        OwnerLock(store + ".owner").acquire(store)
    message = str(refused.value)
    assert f"the session store {store} is in use by another process (pid {other.pid}, started at 20" in message
    assert "--session-store sqlite:OTHER_PATH" in message and "redis://" in message
    assert f"Owner record: {store}.owner" in message


@pytest.mark.slow
def test_an_owner_killed_with_sigkill_is_taken_over(tmp_path, holder, caplog):
    path = str(tmp_path / "s.sqlite3.owner")
    other = holder(path)
    os.kill(other.pid, signal.SIGKILL)
    other.join(10)
    lock = OwnerLock(path)
    with caplog.at_level("INFO", logger="policy_extender.instance"):
        lock.acquire("the store")
    assert f"taking over from an owner that is gone (pid {other.pid}" in caplog.text
    assert instance.read_owner(path).pid == os.getpid()
    lock.release()
    assert open(path).read() == ""  # released: no owner recorded


@pytest.mark.parametrize("journal", ["WAL", "DELETE"])  # the write lock is on -shm, or on the file
@pytest.mark.slow
def test_the_owner_lock_never_opens_the_database_files_and_keeps_sqlites_locks(tmp_path, journal):
    """SQLite's POSIX locks die when any descriptor of the database file closes: taking and
    releasing the owner lock must not touch the database, its -wal or its -shm."""
    store = str(tmp_path / "s.sqlite3")
    conn = sqlite3.connect(store, isolation_level=None)
    conn.execute(f"PRAGMA journal_mode = {journal}")
    conn.execute("CREATE TABLE t (x)")
    conn.execute("BEGIN EXCLUSIVE")  # this process holds SQLite's write lock
    conn.execute("INSERT INTO t VALUES (1)")
    before = _open_files()
    lock = OwnerLock(store + ".owner")
    lock.acquire(store)
    lock.release()
    assert _open_files() - before == set()
    assert _other_process_may_write(store) == "locked"  # SQLite's write lock is still ours
    conn.execute("COMMIT")
    assert _other_process_may_write(store) == "written"


def _other_process_may_write(store: str) -> str:
    """Whether another process can take SQLite's write lock now (POSIX locks are per process:
    only another process sees them dropped)."""
    script = ("import sqlite3, sys\n"
              "c = sqlite3.connect(sys.argv[1], timeout=0, isolation_level=None)\n"
              "try:\n    c.execute('BEGIN IMMEDIATE'); c.execute('ROLLBACK'); print('written')\n"
              "except sqlite3.OperationalError as e:\n    print('locked' if 'locked' in str(e) else e)\n")
    return subprocess.run([sys.executable, "-c", script, store], capture_output=True, text=True,
                          timeout=30).stdout.strip()


def _open_files() -> set[str]:
    return {os.readlink(f"/proc/self/fd/{fd}") for fd in os.listdir("/proc/self/fd")
            if os.path.exists(f"/proc/self/fd/{fd}")}


@pytest.mark.slow
def test_a_runtime_directory_is_private_and_swept_only_when_its_owner_is_gone(tmp_path):
    parent = str(tmp_path)
    mine, lock = instance.make_runtime_dir(parent)
    assert stat.S_IMODE(os.stat(mine).st_mode) == 0o700
    assert os.path.basename(mine).startswith(f"policy-extender-{os.getpid()}-")
    assert instance.read_owner(os.path.join(mine, "owner")).pid == os.getpid()
    dead = FORK.Process(target=lambda: instance.make_runtime_dir(parent) and os.kill(os.getpid(), signal.SIGKILL))
    dead.start()
    dead.join(10)
    (stale,) = [os.path.join(parent, d) for d in os.listdir(parent) if os.path.join(parent, d) != mine]
    os.mkdir(os.path.join(parent, "policy-extender-being-made"))  # no owner record yet: left alone
    assert instance.sweep_stale(parent) == [stale]
    assert sorted(os.listdir(parent)) == sorted([os.path.basename(mine), "policy-extender-being-made"])
    lock.release()


def test_start_resolves_the_default_store_and_metrics_into_the_runtime_directory(tmp_path):
    environ: dict[str, str] = {}
    started = instance.start(Config(), environ=environ)
    try:
        assert started.config.session_store == "sqlite:" + os.path.join(started.runtime_dir, "sessions.sqlite3")
        assert environ["PROMETHEUS_MULTIPROC_DIR"] == os.path.join(started.runtime_dir, "metrics")
        assert os.path.dirname(started.runtime_dir) == instance.runtime_parent()
    finally:
        started.close()
    assert not os.path.exists(started.runtime_dir)


def test_start_honours_an_explicit_metrics_directory_and_claims_an_explicit_store(tmp_path, holder):
    environ = {"PROMETHEUS_MULTIPROC_DIR": str(tmp_path / "prom")}
    store = str(tmp_path / "s.sqlite3")
    started = instance.start(Config(session_store=f"sqlite:{store}"), environ=environ)
    try:
        assert started.config.session_store == f"sqlite:{store}"
        assert environ["PROMETHEUS_MULTIPROC_DIR"] == str(tmp_path / "prom")
        assert instance.read_owner(store + ".owner").pid == os.getpid()
        with pytest.raises(StoreInUse):  # a second instance in this very process is refused too
            instance.start(Config(session_store=f"sqlite:{store}"), environ={})
    finally:
        started.close()
    second = instance.start(Config(session_store=f"sqlite:{store}"), environ={})  # free again
    second.close()


def test_redis_stores_have_no_owner(tmp_path):
    started = instance.start(Config(session_store="redis://127.0.0.1:1/0"), environ={})
    try:
        assert started.config.session_store == "redis://127.0.0.1:1/0"
        assert len(started.locks) == 1  # the runtime directory's own record only
    finally:
        started.close()


@pytest.mark.slow
def test_a_forked_child_unwinding_through_close_leaves_the_directory(tmp_path):
    started = instance.start(Config(), environ={})
    try:
        child = FORK.Process(target=started.close)
        child.start()
        child.join(10)
        assert os.path.isdir(started.runtime_dir)
    finally:
        started.close()


def test_the_default_store_after_an_instance_closed_is_in_a_directory_that_exists(monkeypatch):
    from policy_extender.session.sqlite import default_path
    monkeypatch.setattr(instance, "_process_runtime", None)  # as in a process that never made one
    started = instance.start(Config(), environ={})
    assert os.path.dirname(default_path()) == started.runtime_dir
    started.close()
    assert os.path.isdir(os.path.dirname(default_path()))


def test_the_same_store_through_a_symlinked_directory_is_the_same_owner(tmp_path):
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    started = instance.start(Config(session_store=f"sqlite:{tmp_path / 'real' / 's.sqlite3'}"), environ={})
    try:
        with pytest.raises(StoreInUse, match="real/s.sqlite3 is in use"):
            instance.start(Config(session_store=f"sqlite:{tmp_path / 'link' / 's.sqlite3'}"), environ={})
    finally:
        started.close()
