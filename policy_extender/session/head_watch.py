"""HeadWatch: a SQLite store's ``head()``, queried again only when the database changed.

Every verb call reads the session head. On the SQLite store that is a query whose step releases
the GIL, and under a gthread worker each release hands the GIL to another thread and back: an
A/B run measured the read at 5-10 % of a predicate's server CPU, far more than its 5 us alone.

In WAL mode every commit, by any connection of any process, rewrites the WAL-index header at
the start of the ``-shm`` file (its ``iChange`` counter is incremented by each transaction, see
https://www.sqlite.org/walformat.html). So the watch maps the first page of that file read-only,
and a call whose 48 header bytes equal those seen just *before* the last real query gets that
query's answer again, with no syscall and no GIL release. The only other way the answer changes
without a commit is expiry: ``expires_at`` is ``opened_at + ttl_seconds``, written once at open
by a store with the same TTL (every worker is configured alike), so the cached head is dropped
as soon as ``time.time()`` reaches it, exactly as the query's ``expires_at > now`` would.

Safe only while this process holds the ``-shm`` file open through one of its own connections
(SQLite truncates the file only when no process has it open): the watch maps the file after a
real query in this process, and the store never closes its connections. Anything unexpected
(another store class, no ``-shm`` file, a short file, any OSError) falls back to querying on
every call.
"""

from __future__ import annotations

import mmap
import os
import time
from typing import Any

#: bytes of the first WAL-index header copy (WalIndexHdr)
HEADER_BYTES = 48
#: WalIndexHdr x2 + WalCkptInfo: the least a live -shm file holds
SHM_MIN_BYTES = 136


class HeadWatch:
    """``head()`` of a SqliteStore, re-queried only after a commit or at the session's expiry."""

    def __init__(self, store: Any) -> None:
        self.store = store
        self._pid: int | None = None
        self._map: mmap.mmap | None = None
        self._seen: tuple[bytes, Any, float] | None = None  # (header, head, expires_at)
        self.queries = 0

    def head(self) -> Any:
        header = self._header()
        seen = self._seen
        if header is not None and seen is not None and seen[0] == header and (
                seen[1] is None or time.time() < seen[2]):
            return seen[1]
        return self._query(header)

    def _query(self, header: bytes | None) -> Any:
        self.queries += 1
        head = self.store.head()
        if header is not None:  # read before the query: a commit in between shows as a change
            expires_at = head.opened_at + self.store.ttl_seconds if head is not None else 0.0
            self._seen = (header, head, expires_at)
        return head

    def _header(self) -> bytes | None:
        if self._pid != os.getpid():
            self._map_shm()
        return self._map[:HEADER_BYTES] if self._map is not None else None

    def _map_shm(self) -> None:
        """Map the -shm file's first page, after a query that makes this process hold it open."""
        self._pid, self._map, self._seen = os.getpid(), None, None
        self.store.head()
        try:
            fd = os.open(self.store.path + "-shm", os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            return
        try:
            if os.fstat(fd).st_size >= SHM_MIN_BYTES:
                self._map = mmap.mmap(fd, SHM_MIN_BYTES, mmap.MAP_SHARED, mmap.PROT_READ)
        except OSError:
            self._map = None
        finally:
            os.close(fd)


def watch_for(store: Any) -> Any:
    """A HeadWatch for a SqliteStore, else None (other stores are queried on every call)."""
    from policy_extender.session.sqlite import SqliteStore
    if type(store) is not SqliteStore or not isinstance(getattr(store, "path", None), str):
        return None
    return HeadWatch(store)
