"""SessionCache: one per worker process; turns the shared store into an ``Env`` per request.

Every call reads the store's ``head()`` once. The snapshot is fetched and decoded again only when
the session id changed; the allocations are fetched and added up again only when ``seq`` changed
(records already decoded in this session are not decoded twice). Otherwise the answer comes from
memory. Safe for the threads of a gthread worker: the fast path only reads one attribute, and a
rebuild happens under a lock, once, for all the threads that need it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from policy_extender.session.allocation import Allocation, decode_allocation
from policy_extender.session.counts import tally
from policy_extender.session.env import SessionEnv, Snapshot, queue_name_of
from policy_extender.session.store import Head, SessionStore
from policy_extender.wire.session import NO_SESSION


@dataclass
class CacheCounts:
    """How often the cache went back to the store beyond ``head()`` (for tests and metrics)."""

    snapshot_loads: int = 0
    allocation_loads: int = 0
    records_decoded: int = 0


@dataclass(frozen=True)
class _Cached:
    env: SessionEnv
    decoded: dict[bytes, Allocation] = field(default_factory=dict)


class SessionCache:
    """The current session of ``store`` as an ``Env`` (see the module docstring)."""

    def __init__(self, store: SessionStore,
                 decode_snapshot: Callable[[bytes], Snapshot] | None = None,
                 decode_allocation: Callable[[bytes], Allocation] = decode_allocation,
                 *, no_session: Any = NO_SESSION) -> None:
        """``decode_snapshot`` defaults to ``wire.snapshot.load_snapshot``, ``decode_allocation``
        to the ``AllocationRecord`` codec the allocate handler writes with."""
        self.store = store
        self._decode_snapshot = decode_snapshot or _wire_snapshot_decoder()
        self._decode_allocation = decode_allocation
        self._no_session = no_session
        self._lock = threading.Lock()
        self._cached: _Cached | None = None
        self.counts = CacheCounts()

    def env(self) -> Any:
        """The env of the current session, or the no-session env. ``env.head`` names the session
        and its pinned policy version."""
        head = self.store.head()
        if head is None:
            return self._no_session
        cached = self._cached
        if cached is not None and _is_fresh(cached, head):
            return cached.env
        with self._lock:
            return self._refresh(head)

    def _refresh(self, head: Head) -> Any:
        cached = self._cached
        if cached is not None and _is_fresh(cached, head):
            return cached.env  # another thread rebuilt it while this one waited
        same_session = cached is not None and cached.env.head.session_id == head.session_id
        snapshot = cached.env.snapshot if same_session else self._load_snapshot(head)
        if snapshot is None:
            return self._no_session  # replaced or closed between head() and snapshot()
        decoded = cached.decoded if same_session else {}
        self._cached = self._load_allocations(head, snapshot, decoded)
        return self._cached.env

    def _load_snapshot(self, head: Head) -> Snapshot | None:
        data = self.store.snapshot(head.session_id)
        if data is None:
            return None
        self.counts.snapshot_loads += 1
        return self._decode_snapshot(data)

    def _load_allocations(self, head: Head, snapshot: Snapshot,
                          previously: dict[bytes, Allocation]) -> _Cached:
        self.counts.allocation_loads += 1
        decoded: dict[bytes, Allocation] = {}
        allocations = [self._decode(record, previously, decoded)
                       for record in self.store.allocations(head.session_id)]
        counters = tally(allocations, lambda job_uid: queue_name_of(snapshot, job_uid))
        return _Cached(SessionEnv(head, snapshot, counters), decoded)

    def _decode(self, record: bytes, previously: dict[bytes, Allocation],
                decoded: dict[bytes, Allocation]) -> Allocation:
        """Decode ``record`` unless this session already did. The memo only saves decoding: two
        tasks with byte-identical records still count twice (totals come from the list)."""
        if record not in decoded:
            if record in previously:
                decoded[record] = previously[record]
            else:
                self.counts.records_decoded += 1
                decoded[record] = self._decode_allocation(record)
        return decoded[record]


def _is_fresh(cached: _Cached, head: Head) -> bool:
    """The cached env is of ``head``'s session and at least as new as ``head``."""
    mine = cached.env.head
    return mine.session_id == head.session_id and mine.seq >= head.seq


def _wire_snapshot_decoder() -> Callable[[bytes], Snapshot]:
    from policy_extender.wire.snapshot import load_snapshot
    return load_snapshot
