"""One ``policy-extender serve`` = one instance: its private runtime directory and its owner records.

Several instances may run on one host (several schedulers, a developer's ``serve`` beside the
test suite, CI). Whatever they must not share lives in a **runtime directory** private to one
instance, made by the gunicorn master before any worker forks and removed when the master exits:

```
/dev/shm/policy-extender-<pid>-<random>/      mode 0700 (tempfile.mkdtemp); /dev/shm when writable
    owner                   the owner record (below), flocked by the master for its whole life
    sessions.sqlite3        the session store of ``--session-store sqlite:`` (the default)
    previous-sessions.sqlite3  that store of the instance this one replaced (below), until a worker read it
    metrics/                PROMETHEUS_MULTIPROC_DIR, unless that variable is set explicitly
    last-good.json          the last good policy set this instance served (policyset.versions.LastGoodCopy)
```

An explicit ``sqlite:PATH`` is guarded by an **owner record** beside it, ``PATH.owner``: a small
file holding the owner's pid, start time and command line, on which the master holds an
exclusive ``flock`` while it runs. A second master pointed at the same file cannot take the lock
and refuses to start (:class:`StoreInUse`, naming the file and the other process). The lock goes
with the process (the kernel drops it when the last descriptor of its open file closes: the
master's and the copies its workers inherited), so an owner that died, even by SIGKILL, is taken
over by the next master without anyone cleaning up.

Why a separate file and ``flock``: SQLite locks the database with POSIX (``fcntl``) locks, and
closing *any* descriptor of a file drops every POSIX lock the process holds on it (SQLite's "How
To Corrupt An SQLite Database File"). So nothing here ever opens the database, its ``-wal`` or its
``-shm`` file, and the owner lock is a BSD ``flock`` on a file of its own, which does not mix
with POSIX locks.

The same owner record, as ``owner`` inside each runtime directory, lets a starting master remove
the runtime directories of instances that died without cleaning up (SIGKILL, OOM): a directory
whose ``owner`` lock nobody holds is stale (:func:`sweep_stale`).

A restart of the whole service in the middle of a cycle (the container killed and started again
with the same command) must not make the cycle's calls decide without its session, which was in
the default store of the instance that died. So before removing a stale directory whose owner
ran the same command line as this process, the new instance takes over its session store as
``previous-sessions.sqlite3`` (a rename: nothing here opens it); the first worker reads it and,
if a session was open there, answers 503 for it until the next onSessionOpen
(``session.lost.inherit_previous``). Another instance sweeping meanwhile (several run on one
host) leaves a stale directory alone while its session store was written within the last
``session_ttl``, so that the restarted instance still finds it. An explicit ``sqlite:PATH``
needs none of this: the restarted instance opens the same file and goes on with the same session.
"""

from __future__ import annotations

import atexit
import dataclasses
import datetime
import fcntl
import json
import logging
import os
import shutil
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from typing import Any, MutableMapping

from policy_extender import process

log = logging.getLogger("policy_extender.instance")

RUNTIME_PREFIX = "policy-extender-"
OWNER_FILE = "owner"
OWNER_SUFFIX = ".owner"
STORE_FILE = "sessions.sqlite3"
PREVIOUS_STORE_FILE = "previous-sessions.sqlite3"
METRICS_DIR = "metrics"
LAST_GOOD_FILE = "last-good.json"
SHM = "/dev/shm"
#: prometheus_client's multiprocess directory variable (metrics.py reads it under this name)
METRICS_ENV = "PROMETHEUS_MULTIPROC_DIR"


class InstanceError(RuntimeError):
    """This process cannot become an instance: the message says where, what, and how to fix it."""


class StoreInUse(InstanceError):
    """Another live process owns the SQLite store this instance was told to use."""


# ---------------------------------------------------------------------------------------------
# owner records


@dataclass(frozen=True)
class OwnerRecord:
    """Who owns a file: read from, and written to, an owner record (one JSON line)."""

    pid: int
    started_at: float
    command: str

    @classmethod
    def of_this_process(cls) -> "OwnerRecord":
        return cls(os.getpid(), time.time(), " ".join(sys.argv) or sys.executable)

    @classmethod
    def parse(cls, text: str) -> "OwnerRecord | None":
        try:
            data = json.loads(text)
            return cls(int(data["pid"]), float(data["started_at"]), str(data["command"]))
        except (ValueError, TypeError, KeyError):
            return None

    def text(self) -> str:
        return json.dumps(dataclasses.asdict(self)) + "\n"

    def describe(self) -> str:
        started = datetime.datetime.fromtimestamp(self.started_at, datetime.timezone.utc)
        return f"pid {self.pid}, started at {started.strftime('%Y-%m-%dT%H:%M:%SZ')}: {self.command}"


class OwnerLock:
    """An exclusive ``flock`` on an owner record file, with the owner's record in it.

    ``acquire()`` raises :class:`StoreInUse` when a live process holds it. The descriptor stays
    open (and locked) until ``release()`` or the end of the process; forked children share it.
    """

    def __init__(self, path: str) -> None:
        self.path = os.path.abspath(path)
        self._fd: int | None = None

    def acquire(self, guarded: str) -> None:
        """Take the lock for ``guarded`` (the file it protects, named in errors)."""
        fd = _open_record(self.path, guarded)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise StoreInUse(_in_use_message(guarded, self.path, read_owner(self.path))) from None
        except BaseException:
            os.close(fd)
            raise
        previous = OwnerRecord.parse(_read_fd(fd))
        if previous is not None and previous.pid != process.pid:
            log.info("%s: taking over from an owner that is gone (%s)", guarded, previous.describe())
        _write_fd(fd, OwnerRecord.of_this_process().text())
        self._fd = fd

    def release(self) -> None:
        """Empty the record and drop the lock (only the process that took it may)."""
        fd, self._fd = self._fd, None
        if fd is None:
            return
        try:
            os.ftruncate(fd, 0)
        finally:
            os.close(fd)


def read_owner(path: str, attempts: int = 20) -> OwnerRecord | None:
    """The record in an owner file; waits briefly for an owner that is still writing it."""
    for _ in range(attempts):
        try:
            with open(path, encoding="utf-8") as stream:
                record = OwnerRecord.parse(stream.read())
        except OSError:
            return None
        if record is not None:
            return record
        time.sleep(0.01)
    return None


def _open_record(path: str, guarded: str) -> int:
    try:
        return os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        raise InstanceError(f"cannot create the owner record {path} of {guarded} ({exc.strerror}): "
                         "check that its directory exists and is writable by this user") from None


def _read_fd(fd: int) -> str:
    os.lseek(fd, 0, os.SEEK_SET)
    return os.read(fd, 64 * 1024).decode("utf-8", "replace")


def _write_fd(fd: int, text: str) -> None:
    os.ftruncate(fd, 0)
    os.pwrite(fd, text.encode(), 0)


def _in_use_message(guarded: str, record_path: str, owner: OwnerRecord | None) -> str:
    who = owner.describe() if owner else f"a process whose record {record_path} is unreadable"
    return (f"the session store {guarded} is in use by another process ({who}); two instances "
            "sharing one SQLite store would answer from each other's scheduling sessions. Stop "
            "that instance, give this one a file of its own (--session-store sqlite:OTHER_PATH, "
            "or `sqlite:` for a private one), or use Redis (--session-store redis://HOST:PORT/DB) "
            f"to share sessions between replicas. Owner record: {record_path}")


# ---------------------------------------------------------------------------------------------
# the runtime directory


#: where runtime directories are made, when set (else /dev/shm or the temp directory)
RUNTIME_PARENT_ENV = "POLICY_EXTENDER_RUNTIME_PARENT"


def runtime_parent() -> str:
    """``$POLICY_EXTENDER_RUNTIME_PARENT`` when set (a directory of this service alone: then no
    other program's instances sweep its stale directories), else ``/dev/shm`` when it is a
    writable directory (tmpfs: fast, gone at reboot), else the temp dir."""
    chosen = os.environ.get(RUNTIME_PARENT_ENV)
    if chosen:
        return chosen
    return SHM if os.path.isdir(SHM) and os.access(SHM, os.W_OK) else tempfile.gettempdir()


def make_runtime_dir(parent: str | None = None) -> tuple[str, OwnerLock]:
    """A new private directory (0700) with its ``owner`` record locked by this process.

    The record is created under a temporary name, locked, then renamed into place: a concurrent
    :func:`sweep_stale` only looks at ``owner`` and so never sees it unlocked.
    """
    directory = tempfile.mkdtemp(prefix=f"{RUNTIME_PREFIX}{os.getpid()}-", dir=parent or runtime_parent())
    lock = OwnerLock(os.path.join(directory, OWNER_FILE + ".new"))
    lock.acquire(directory)
    os.rename(lock.path, os.path.join(directory, OWNER_FILE))
    lock.path = os.path.join(directory, OWNER_FILE)
    return directory, lock


def sweep_stale(parent: str | None = None, successor: str | None = None, keep_seconds: float = 0.0) -> list[str]:
    """Remove this user's runtime directories whose owner is gone; returns the paths removed.
    ``successor``: this instance's new runtime directory, which takes over the session store of
    a stale one whose owner ran this process's command line; a stale directory of another
    command line whose session store was written in the last ``keep_seconds`` is left for its
    own successor (the module docstring)."""
    parent = parent or runtime_parent()
    removed: list[str] = []
    try:
        entries = os.listdir(parent)
    except OSError:
        return removed
    for name in entries:
        path = os.path.join(parent, name)
        fd = _claim_stale(path) if name.startswith(RUNTIME_PREFIX) and path != successor else None
        if fd is not None:
            if successor is not None and not _take_over_store(fd, path, successor) and \
                    _written_within(os.path.join(path, STORE_FILE), keep_seconds):
                os.close(fd)  # another command's: its restart may come for it
                continue
            shutil.rmtree(path, ignore_errors=True)
            os.close(fd)
            removed.append(path)
    if removed:
        log.info("removed %d runtime directories of instances that are gone: %s", len(removed), ", ".join(removed))
    return removed


def _written_within(store: str, seconds: float) -> bool:
    """Whether the store file (or its WAL, where commits land first) changed in the last ``seconds``."""
    newest = 0.0
    for suffix in ("", "-wal"):
        try:
            newest = max(newest, os.path.getmtime(store + suffix))
        except OSError:
            pass
    return time.time() - newest < seconds


def _take_over_store(owner_fd: int, stale: str, successor: str) -> bool:
    """Move the stale directory's default session store into ``successor`` as
    PREVIOUS_STORE_FILE when its owner ran this process's command line (the newest such wins);
    whether the owner ran this command line."""
    owner = OwnerRecord.parse(_read_fd(owner_fd))
    if owner is None or owner.command != OwnerRecord.of_this_process().command:
        return False
    if not os.path.exists(os.path.join(stale, STORE_FILE)):
        return True
    previous = os.path.join(successor, PREVIOUS_STORE_FILE)
    try:
        if os.path.exists(previous) and os.path.getmtime(previous) >= os.path.getmtime(os.path.join(stale, STORE_FILE)):
            return True
        for suffix in ("", "-wal", "-shm"):
            if os.path.exists(os.path.join(stale, STORE_FILE + suffix)):
                os.replace(os.path.join(stale, STORE_FILE + suffix), previous + suffix)
        log.info("took over the session store of the instance this one replaced (%s): a session it "
                 "held is answered 503 until the next onSessionOpen", owner.describe())
    except OSError as exc:
        log.warning("could not take over the session store in %s (%s)", stale, exc)
    return True


def _claim_stale(directory: str) -> int | None:
    """The locked descriptor of ``directory``'s owner record when the directory is this user's
    and its owner is gone (nobody holds the lock), else None."""
    try:
        if not os.path.isdir(directory) or os.lstat(directory).st_uid != os.geteuid():
            return None
        fd = os.open(os.path.join(directory, OWNER_FILE), os.O_RDWR | os.O_CLOEXEC)
    except OSError:
        return None  # no record yet (an instance being made) or not ours
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None  # a live owner holds it (EWOULDBLOCK), or the file system refuses locks
    return fd


# ---------------------------------------------------------------------------------------------
# the instance


@dataclass
class Instance:
    """A started instance: the configuration its workers get, and what to clean up at exit."""

    runtime_dir: str
    config: Any
    pid: int = field(default_factory=lambda: process.pid)
    locks: list[OwnerLock] = field(default_factory=list)
    metrics_dir: str | None = None

    @property
    def last_good_path(self) -> str:
        return os.path.join(self.runtime_dir, LAST_GOOD_FILE)

    def close(self) -> None:
        """Remove the runtime directory and drop the owner locks. Only the master that made them
        does anything: a forked worker that unwinds through the same code leaves them alone."""
        global _process_runtime
        if self.pid != process.pid:
            return
        with _process_lock:
            if _process_runtime is self:  # default_path() makes a new directory if asked again
                _process_runtime = None
        shutil.rmtree(self.runtime_dir, ignore_errors=True)
        for lock in self.locks:
            lock.release()
        self.locks.clear()


def start(config: Any, environ: MutableMapping[str, str] = os.environ) -> Instance:
    """Make this process an instance: claim an explicit SQLite store, make the runtime directory,
    point the default store and the metrics there. Raises :class:`InstanceError`
    (:class:`StoreInUse` when another live process owns the SQLite file).

    Returns the :class:`Instance` whose ``config`` has ``session_store`` resolved to a path.
    """
    locks = []
    store = config.session_store
    if store.startswith("sqlite:") and store != "sqlite:":
        path = os.path.realpath(store[len("sqlite:"):])  # one record whatever the spelling or symlink
        lock = OwnerLock(path + OWNER_SUFFIX)
        lock.acquire(path)
        locks.append(lock)
    try:
        directory, own = make_runtime_dir()
        sweep_stale(successor=directory, keep_seconds=float(getattr(config, "session_ttl", 300.0)))
    except OSError as exc:
        for lock in locks:
            lock.release()
        raise InstanceError(f"cannot make the runtime directory in {runtime_parent()} "
                            f"({exc.strerror}): make it writable, or set TMPDIR to a writable "
                            "directory when /dev/shm is not") from None
    except BaseException:
        for lock in locks:
            lock.release()
        raise
    if store == "sqlite:":
        store = "sqlite:" + os.path.join(directory, STORE_FILE)
    instance = Instance(directory, dataclasses.replace(config, session_store=store), locks=[own, *locks])
    if not environ.get(METRICS_ENV):
        instance.metrics_dir = environ[METRICS_ENV] = os.path.join(directory, METRICS_DIR)
    global _process_runtime
    with _process_lock:
        _process_runtime = _process_runtime or instance  # default_path() in this process: here too
    return instance


_process_runtime: Instance | None = None
_process_lock = threading.Lock()


def process_runtime_dir() -> str:
    """A private runtime directory for a process that is not a ``serve`` master (an app made with
    ``create_app`` in a test or an embedding): made on first use, shared with the children forked
    after that, removed at the exit of the process that made it."""
    global _process_runtime
    with _process_lock:
        if _process_runtime is None:
            directory, lock = make_runtime_dir()
            _process_runtime = Instance(directory, None, locks=[lock])
            atexit.register(_process_runtime.close)
        return _process_runtime.runtime_dir
