"""Recorder: what the service calls after every verb call when ``--record DIR`` is on.

``record()`` runs on the request path and only decides and enqueues: sampling is a hash of the
session id (so every worker keeps or skips the same cycles, whole), and the queue is bounded in
items and bytes — when it is full the call is dropped and counted, never waited for. One writer
thread per worker process redacts, compresses and appends each call to that worker's own file
of the cycle (``DIR/<cycle>/<host>-<pid>.rec``, see ``frames``), and enforces the size cap.
Files are created 0600 in 0700 directories.
"""

from __future__ import annotations

import atexit
import errno
import hashlib
import logging
import os
import queue
import socket
import stat
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Callable

from policy_extender import process
from policy_extender.decide.verbs import EVERY_VERB

from . import frames, redact, rotation

log = logging.getLogger(__name__)

#: Files kept open per worker (cycles overlap only at a session's turn).
OPEN_FILES = 4
_STOP = object()


@dataclass
class RecorderCounts:
    recorded: int = 0        # calls written
    dropped: int = 0         # calls dropped because the queue was full
    skipped: int = 0         # calls of cycles not sampled
    write_errors: int = 0
    cycles_deleted: int = 0  # by the size cap


def sampled(cycle_key: str, rate: float) -> bool:
    """The same answer in every worker and replica: a hash of the key against ``rate``."""
    if rate >= 1.0:
        return True
    digest = hashlib.sha256(cycle_key.encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2.0**64 < rate


def cycle_name(session_id: str | None, opened_at: float | None, now: float) -> str:
    """``20250602T080000.123Z-<session id>``; calls outside a session share one per hour."""
    if not session_id:
        return time.strftime("%Y%m%dT%H0000.000Z-nosession", time.gmtime(now))
    stamp = opened_at if opened_at is not None else now
    millis = int(stamp * 1000) % 1000
    return time.strftime("%Y%m%dT%H%M%S", time.gmtime(stamp)) + f".{millis:03d}Z-{session_id}"


class Recorder:
    """Records verb calls of sampled cycles into ``directory`` (see the module docstring)."""

    def __init__(self, directory: str, *, sample: float = 1.0, max_bytes: int = 1 << 30,
                 redact_kinds: frozenset[str] = frozenset(), queue_items: int = 4096,
                 queue_bytes: int = 256 << 20,
                 annotation_keys: Callable[[str], frozenset[str]] | None = None,
                 compress: bool = False) -> None:
        self.directory = os.path.abspath(directory)
        self.sample, self.max_bytes, self.redact_kinds = sample, max_bytes, frozenset(redact_kinds)
        self.queue_items, self.queue_bytes = queue_items, queue_bytes
        # zlib shrinks bodies ~4x but costs ~400 us of CPU per 25 KB predicate on a small node,
        # which competes with the requests (docs/replay.md has the figures): off by default.
        self.compress = compress
        self.annotation_keys = annotation_keys or (lambda version: frozenset())
        self.counts = RecorderCounts()
        self._pid: int | None = None
        make_private_dir(self.directory)

    # -- the request path ----------------------------------------------------------------------

    def record(self, session_id: str | None, verb: str, request_bytes: bytes, status: int,
               response_bytes: bytes, policy_version: str, *, started_ns: int | None = None,
               opened_at: float | None = None) -> bool:
        """Queue one call; False when its cycle is not sampled or the queue is full."""
        now = time.time()
        cycle = cycle_name(session_id, opened_at, now)
        if not sampled(cycle if not session_id else session_id, self.sample):
            self.counts.skipped += 1
            return False
        self._ensure_writer()
        size = len(request_bytes) + len(response_bytes)
        item = (cycle, session_id, opened_at, verb, request_bytes, status, response_bytes,
                policy_version, started_ns or time.time_ns())
        with self._lock:
            if self._pending_bytes + size > self.queue_bytes:
                return self._drop(cycle)
            try:
                self._queue.put_nowait(item)
            except queue.Full:
                return self._drop(cycle)
            self._pending_bytes += size
        return True

    def _drop(self, cycle: str) -> bool:
        self.counts.dropped += 1
        self._drops[cycle] = self._drops.get(cycle, 0) + 1
        return False

    # -- lifecycle -----------------------------------------------------------------------------

    def flush(self, timeout: float = 30.0) -> bool:
        """Wait until every queued call is written; False on timeout."""
        if self._pid != process.pid:
            return True
        deadline = time.monotonic() + timeout
        while self._queue.unfinished_tasks and time.monotonic() < deadline:
            time.sleep(0.002)
        return not self._queue.unfinished_tasks

    def close(self, timeout: float = 30.0) -> None:
        if self._pid != process.pid:
            return
        self.flush(timeout)
        self._queue.put(_STOP)
        self._thread.join(timeout)
        self._pid = None

    def _ensure_writer(self) -> None:
        """Start this process's writer (again after a fork: threads do not survive it)."""
        if self._pid == process.pid:
            return
        self._lock = threading.Lock()
        self._queue: queue.Queue = queue.Queue(self.queue_items)
        self._pending_bytes = 0
        self._drops: dict[str, int] = {}
        writer = _Writer(self)
        self._thread = threading.Thread(target=writer.run, name="policy-extender-recorder",
                                        daemon=True)
        self._pid = process.pid
        self._thread.start()
        atexit.register(self.close, 5.0)  # a worker's graceful exit writes what is queued


class _Writer:
    """The writer thread of one worker: items from the queue into the cycle files."""

    def __init__(self, recorder: Recorder) -> None:
        self.recorder = recorder
        self.files: OrderedDict[str, int] = OrderedDict()
        self.seq = 0
        self.since_check = 0
        self.keys_by_version: dict[str, frozenset[str]] = {}
        self.host = socket.gethostname()

    def run(self) -> None:
        rec = self.recorder
        while True:
            item = rec._queue.get()
            try:
                if item is _STOP:
                    self._close_all()
                    return
                self._write(item)
            except Exception:  # a full disk must not kill the thread: count, log, go on
                rec.counts.write_errors += 1
                log.exception("recording a call failed")
            finally:
                if item is not _STOP:
                    with rec._lock:
                        rec._pending_bytes -= len(item[4]) + len(item[6])
                rec._queue.task_done()

    def _write(self, item: tuple) -> None:
        cycle, session_id, opened_at, verb, request, status, response, version, started_ns = item
        fd = self._file(cycle, session_id, opened_at)
        self.seq += 1
        meta = {"type": "call", "verb": verb, "status": status, "policy_version": version,
                "started_ns": started_ns, "pid": os.getpid(), "seq": self.seq,
                "encoding": "zlib" if self.recorder.compress else "identity"}
        dropped = self.recorder._drops.pop(cycle, 0)
        if dropped:
            meta["dropped_before"] = dropped
        parts = frames.frame_parts(
            meta, request=self._encoded(self._redacted(request, version)),
            response=self._encoded(self._redacted_response(verb, response, version)))
        frames.write_all(fd, parts)
        self.recorder.counts.recorded += 1
        self._account(sum(map(len, parts)), cycle)

    def _encoded(self, body: bytes) -> bytes:
        return frames.compress(body) if self.recorder.compress else body

    def _redacted(self, body: bytes, version: str) -> bytes:
        kinds = self.recorder.redact_kinds
        if not kinds:
            return body
        return redact.redact_body(body, kinds, self._keys(version))

    def _redacted_response(self, verb: str, body: bytes, version: str) -> bytes:
        """An answer that carries whole objects (victims answers: TaskInfos), redacted like requests."""
        entry = EVERY_VERB.get(verb)
        return self._redacted(body, version) if entry is not None and entry.redact_answer else body

    def _keys(self, version: str) -> frozenset[str]:
        if version not in self.keys_by_version:
            try:
                self.keys_by_version[version] = frozenset(self.recorder.annotation_keys(version))
            except Exception:  # an unknown version keeps nothing: safe, only less replayable
                log.exception("cannot read the annotation keys of policy version %s", version)
                self.keys_by_version[version] = frozenset()
        return self.keys_by_version[version]

    def _file(self, cycle: str, session_id: str | None, opened_at: float | None) -> int:
        fd = self.files.get(cycle)
        if fd is not None:
            self.files.move_to_end(cycle)
            return fd
        directory = os.path.join(self.recorder.directory, cycle)
        make_private_dir(directory)
        path = os.path.join(directory, f"{self.host}-{os.getpid()}.rec")
        # never through a symbolic link planted at the file's name (another user's file written to)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC | NOFOLLOW, 0o600)
        os.fchmod(fd, 0o600)
        if os.fstat(fd).st_size == 0:
            frames.write_all(fd, frames.frame_parts(self._header(cycle, session_id, opened_at)))
        self.files[cycle] = fd
        while len(self.files) > OPEN_FILES:
            os.close(self.files.popitem(last=False)[1])
        self._check_cap(cycle)
        return fd

    def _header(self, cycle: str, session_id: str | None, opened_at: float | None) -> dict:
        return {"type": "header", "format": frames.FORMAT_VERSION, "cycle": cycle,
                "session_id": session_id or "", "opened_at": opened_at, "host": self.host,
                "pid": os.getpid(), "created_at": time.time(),
                "redacted": sorted(self.recorder.redact_kinds)}

    def _account(self, size: int, cycle: str) -> None:
        self.since_check += size
        if self.since_check * 16 > self.recorder.max_bytes > 0:
            self._check_cap(cycle)

    def _check_cap(self, current: str) -> None:
        self.since_check = 0
        deleted = rotation.enforce_cap(self.recorder.directory, self.recorder.max_bytes,
                                       frozenset({current}))
        for name in deleted:
            fd = self.files.pop(name, None)
            if fd is not None:
                os.close(fd)
        self.recorder.counts.cycles_deleted += len(deleted)

    def _close_all(self) -> None:
        for fd in self.files.values():
            os.close(fd)
        self.files.clear()


#: ``O_NOFOLLOW`` where the system has it: opening a symbolic link fails (``ELOOP``)
NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


def make_private_dir(path: str) -> None:
    """``path`` (and missing parents) as a directory only its owner can enter (0700); a symbolic
    link there is refused (OSError), not followed: the recording is written only where it says."""
    os.makedirs(path, mode=0o700, exist_ok=True)
    if stat.S_ISLNK(os.lstat(path).st_mode):
        raise OSError(errno.ELOOP, f"{path} is a symbolic link: the recorder writes only into "
                      "directories, never through a link; remove it or record elsewhere")
    os.chmod(path, 0o700)
