"""SessionCache: one per worker process; turns the shared store into an ``Env`` per request.

Every call reads the store's ``head()`` once (on the SQLite store through ``head_watch``, which
answers from memory until the database file records a commit or the session expires). The snapshot is fetched and decoded again only when
the session id changed. When ``seq`` moved, only the events after the ones already applied are
fetched (``store.changes``) and applied to the counters, so a cycle with thousands of
allocations costs each worker O(new events) per request, not O(all allocations). Otherwise the
answer comes from memory. Safe for the threads of a gthread worker: the fast path only reads one
attribute, and catching up happens under a lock, once, for every thread that needs it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from policy_extender.session.allocation import Allocation, decode_allocation
from policy_extender.session.counts import Counters
from policy_extender.session.env import SessionEnv, Snapshot, queue_name_of
from policy_extender.session.head_watch import watch_for
from policy_extender.session.store import Head, SessionStore
from policy_extender.wire.session import NO_SESSION


#: :meth:`SessionCache.last_head` before this thread's call read the head
NOT_READ = object()


@dataclass
class CacheCounts:
    """How often the cache went back to the store beyond ``head()`` (for tests and metrics)."""

    snapshot_loads: int = 0
    change_loads: int = 0
    records_decoded: int = 0


@dataclass(frozen=True)
class _Cached:
    env: SessionEnv  # env.head.seq: how many of the session's events are applied
    records: dict[str, Allocation]  # task uid -> allocation; touched only under the lock


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
        self._last = threading.local()
        self._watch = watch_for(store)
        self.counts = CacheCounts()

    def env(self) -> Any:
        """The env of the current session, or the no-session env. ``env.head`` names the session
        and its pinned policy version."""
        head = self._watch.head() if self._watch is not None else self.store.head()
        self._last.head = head
        if head is None:
            return self._no_session
        cached = self._cached
        if cached is not None and _is_fresh(cached, head):
            return cached.env
        with self._lock:
            return self._refresh(head)

    def forget_last_head(self) -> None:
        """Start a call: :meth:`last_head` says NOT_READ until this thread's next :meth:`env`."""
        self._last.head = NOT_READ

    def last_head(self) -> Head | None | object:
        """The head this thread's last :meth:`env` read (None: no session), or NOT_READ.
        Lets the recorder name a call's session without a second ``head()`` read."""
        return getattr(self._last, "head", NOT_READ)

    def _refresh(self, head: Head) -> Any:
        cached = self._cached
        if cached is not None and _is_fresh(cached, head):
            return cached.env  # another thread caught up while this one waited
        if cached is None or cached.env.head.session_id != head.session_id:
            cached = self._start(head)
            if cached is None:
                return self._no_session  # replaced or closed between head() and snapshot()
        self._cached = self._catch_up(cached)
        return self._cached.env

    def _start(self, head: Head) -> _Cached | None:
        """A new session: its snapshot, and no events applied yet."""
        data = self.store.snapshot(head.session_id)
        if data is None:
            return None
        self.counts.snapshot_loads += 1
        env = SessionEnv(head._replace(seq=0), self._decode_snapshot(data), Counters())
        return _Cached(env, {})

    def _catch_up(self, cached: _Cached) -> _Cached:
        """Apply the events the store has beyond those already applied."""
        env, records = cached.env, cached.records
        self.counts.change_loads += 1
        changes = self.store.changes(env.head.session_id, env.head.seq)
        events = [self._replace(records, task_uid, record) for task_uid, record in changes]
        counters = env.counters.apply(events, lambda job: queue_name_of(env.snapshot, job))
        head = env.head._replace(seq=env.head.seq + len(changes))
        return _Cached(SessionEnv(head, env.snapshot, counters), records)

    def _replace(self, records: dict[str, Allocation], task_uid: str,
                 record: bytes | None) -> tuple[Allocation | None, Allocation | None]:
        """Update ``records`` for one event; (the allocation it removed, the one it added)."""
        removed = records.pop(task_uid, None)
        if record is None:
            return removed, None
        self.counts.records_decoded += 1
        records[task_uid] = added = self._decode_allocation(record)
        return removed, added


def _is_fresh(cached: _Cached, head: Head) -> bool:
    """The cached env is of ``head``'s session and has applied at least ``head.seq`` events."""
    mine = cached.env.head
    return mine.session_id == head.session_id and mine.seq >= head.seq


def _wire_snapshot_decoder() -> Callable[[bytes], Snapshot]:
    from policy_extender.wire.snapshot import load_snapshot
    return load_snapshot
