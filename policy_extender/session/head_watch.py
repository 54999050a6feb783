"""HeadWatch: a SQLite store's ``head()``, queried again only when the database changed.

Every verb call reads the session head. On the SQLite store that is a query whose step releases
the GIL, and under a gthread worker each release hands the GIL to another thread and back: an
A/B run measured the read at 5-10 % of a predicate's server CPU, far more than its 5 us alone.

In WAL mode every commit, by any connection of any process, rewrites the WAL-index header at
the start of the ``-shm`` file (its ``iChange`` counter is incremented by each transaction, see
https://www.sqlite.org/walformat.html). So the watch maps the first page of that file read-only,
and a call whose 48 header bytes equal those seen just *before* the last real query gets that
query's answer again, with no syscall and no GIL release. The only other way the answer changes
without a commit is expiry: the query gives the head's ``expires_at`` on the store's boot clock
(``sqlite.session_clock``, never stepped like the wall clock), so the cached head is dropped as
soon as that clock reaches it, exactly as the query's ``expires_at > now`` would. Every time
here is on that clock.

Locks. SQLite's WAL locks (the read and write locks and the "DMS" byte that tells other processes
the wal-index is live) are POSIX advisory locks, and on Linux closing *any* descriptor of a file
releases every POSIX lock the process holds on that file. So the watch never closes what it
opens: the descriptor of the ``-shm`` file and its mapping (which holds a duplicate descriptor)
are kept for the life of the process in ``_HELD``, once per process. Closing them would let a
new process rebuild (truncate) the wal-index under the running ones (SIGBUS) and let another
writer in while a thread of this process is inside a write transaction (a lost commit); see
SQLite's "How To Corrupt An SQLite Database File", section 2.2, and tests/session/test_sqlite_locks.py.

The watch also asks the store, at least every ``CHECK_SECONDS``, whether its path still names the
file this process has open (``SqliteStore.check_file``), and maps the new file's ``-shm`` after
the store moved to it.

The map is made after a real query in this process, so its connection holds the DMS lock and
the file is live. Anything unexpected (another store class, no ``-shm`` file, a short file, any
OSError) falls back to querying on every call.
"""

from __future__ import annotations

import mmap
import os
import threading
import time
from typing import Any, NamedTuple

from policy_extender import process
from policy_extender.session.sqlite import CHECK_SECONDS, SqliteStore, session_clock

#: bytes of the first WAL-index header copy (WalIndexHdr)
HEADER_BYTES = 48
#: WalIndexHdr x2 + WalCkptInfo: the least a live -shm file holds
SHM_MIN_BYTES = 136

#: (pid, descriptor, mapping) of every -shm file a watch opened: never closed (see the docstring)
_HELD: list[tuple[int, int, mmap.mmap | None]] = []
#: (pid, device, inode) of a -shm file -> its mapping in _HELD, shared by the watches of a process
_MAPS: dict[tuple[int, int, int], mmap.mmap | None] = {}
_MAPS_LOCK = threading.Lock()


class HeadAnswer(NamedTuple):
    """A head the watch read, and what it holds under: it is given again while the map's header
    still equals ``header``, ``session_clock()`` is in [valid_from, valid_until) (up to the session's
    expiry or the next file check), and neither the process (a fork) nor the store's file (its
    generation) changed (:meth:`HeadWatch.holds`)."""

    header: bytes          # the map's first HEADER_BYTES when the head was read
    head: Any              # the store's Head, or None (no session)
    expires_at: float      # the session's expiry (inf without one)
    valid_from: float
    valid_until: float
    pid: int
    generation: int        # the store's file (``SqliteStore.generation``)
    map: mmap.mmap


class HeadWatch:
    """``head()`` of a SqliteStore, re-queried only after a commit or at the session's expiry."""

    def __init__(self, store: Any) -> None:
        self.store = store
        self._mapped_for: tuple[int, int] | None = None  # (pid, store generation) of the map
        self._next_check = 0.0
        self._map: mmap.mmap | None = None
        #: the last answer, given again while it holds
        self._seen: HeadAnswer | None = None
        self.queries = 0

    def head(self) -> Any:
        seen = self._seen
        if seen is not None and self.holds(seen):  # one clock read and one 48-byte compare
            return seen.head
        return self._head_slow()

    def holds(self, answer: HeadAnswer) -> bool:
        """``answer`` is still the store's head: no commit since (the header), not expired nor
        due for a file check, and the same process and file."""
        return (answer.valid_from <= session_clock() < answer.valid_until and answer.pid == process.pid
                and answer.generation == self.store.generation and answer.map[:HEADER_BYTES] == answer.header)

    def last_answer(self) -> HeadAnswer | None:
        """The last answer, or None: a caller may give what it derived from its ``head`` again
        while :meth:`holds` passes on it (``SessionCache.env``)."""
        return self._seen

    def _head_slow(self) -> Any:
        """The file check when due, then the header: unchanged, the last head is given again
        (until the session expires); changed, or a new map, the store is queried."""
        mono = time.monotonic()
        if mono >= self._next_check:
            self.store.check_file()
            mono = time.monotonic()
            self._next_check = mono + CHECK_SECONDS
        pid, generation = process.pid, self.store.generation  # read before the map: never newer than it
        if self._mapped_for != (pid, generation):
            self._map_shm()
        mapped = self._map
        if mapped is None:
            return self._query()
        header, now, seen = mapped[:HEADER_BYTES], session_clock(), self._seen
        if seen is not None and seen.map is mapped and seen.header == header and now < seen.expires_at:
            head, expires_at = seen.head, seen.expires_at
        else:
            # the header was read first: a commit in between shows as a change
            head, expires_at = self._query_until()
        self._seen = HeadAnswer(header, head, expires_at, valid_from=now,
                            valid_until=min(expires_at, now + (self._next_check - mono)),
                            pid=pid, generation=generation, map=mapped)
        return head

    def _query(self) -> Any:
        self.queries += 1
        return self.store.head()

    def _query_until(self) -> tuple[Any, float]:
        self.queries += 1
        return self.store.head_until()

    def _map_shm(self) -> None:
        """Map the -shm file's first page, after a query that makes this process hold it open."""
        self._map, self._seen = None, None
        self.store.head()
        self._mapped_for = (process.pid, self.store.generation)
        self._map = shared_map(self.store.path + "-shm")


def shared_map(path: str) -> mmap.mmap | None:
    """This process's read-only map of the first bytes of ``path`` (None if it cannot be mapped).
    One per process and file, opened once and never closed (see the module docstring)."""
    with _MAPS_LOCK:
        try:
            info = os.stat(path)
        except OSError:
            return None
        key = (process.pid, info.st_dev, info.st_ino)
        if key in _MAPS:
            return _MAPS[key]
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            return None
        mapped = None
        try:
            opened = os.fstat(fd)
            if opened.st_size >= SHM_MIN_BYTES:
                mapped = mmap.mmap(fd, SHM_MIN_BYTES, mmap.MAP_SHARED, mmap.PROT_READ)
                _MAPS[(key[0], opened.st_dev, opened.st_ino)] = mapped
        except OSError:
            mapped = None
        _HELD.append((key[0], fd, mapped))
        return mapped


def watch_for(store: Any) -> Any:
    """A HeadWatch for a SqliteStore, else None (other stores are queried on every call)."""
    if type(store) is not SqliteStore or not isinstance(getattr(store, "path", None), str):
        return None
    return HeadWatch(store)
