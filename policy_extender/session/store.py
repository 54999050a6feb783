"""The session store contract: what every shared store (SQLite, Redis) offers, and its records.

A session is the span onSessionOpen -> onSessionClose of one Volcano scheduling cycle. Volcano
sends no session id, so the store itself names the current session; every gunicorn worker (and,
with Redis, every replica) reads the same current session through it.

The common request costs one call, ``head()``: a worker compares the head it cached with the one
it reads and re-reads the snapshot only when ``session_id`` changed, the allocations only when
``seq`` or ``tip`` changed.

Events are counted *net* (docs/language.md, "this cycle's allocations"). Volcano fires
AllocateFunc and DeallocateFunc in pairs that undo each other (``Allocate``/``unallocate``,
``Pipeline``/``unpipeline``, ``Evict``/``unevict`` in ``framework/statement.go``), and an eviction
deallocates a task that was running before the cycle. So the store keeps, per task, its net
change this cycle (-1, 0 or +1), the kind of the last event, and the last record: an event of the
same kind as the last one is a retry and changes nothing (a retried allocate replaces the
record), an allocate adds one and a deallocate takes one away. Evict then unevict nets to zero,
an eviction alone counts -1 on the victim's node, job and queue.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import NamedTuple, Protocol

#: Seconds after which a session whose onSessionClose never arrived is treated as closed.
#: Volcano cycles take about a second; five minutes only catches a scheduler that died mid-cycle.
DEFAULT_TTL_SECONDS = 300.0


class Change(NamedTuple):
    """One event of the cycle as stored: the task's net change after it (-1, 0 or +1), the task's
    last record, and ``tip``, an id made for this change alone (the head carries the last one, so
    a reader can tell two histories of the same length apart)."""

    task_uid: str
    net: int
    record: bytes
    tip: str


class Head(NamedTuple):
    """The current session: its id, its change counter, the policy version pinned at open, and
    the tip (id) of its last change ("" before the first)."""

    session_id: str
    seq: int
    policy_version: str
    opened_at: float
    tip: str = ""


class SessionLost(RuntimeError):
    """The store no longer holds the session a worker was deciding with (the store restarted
    empty, its file was replaced, it lost acknowledged writes, a Sentinel failover happened
    since the session opened): answered 503, so Volcano's ``extender.ignorable`` decides, never
    a decision made with no session."""


class OpenSuperseded(RuntimeError):
    """An onSessionOpen that was overtaken: an open or close that arrived after it (a greater
    ``begin_open`` ticket) was stored first, so storing this one would replace a later cycle's
    session. Nothing was stored; Volcano, which sends the next cycle's open only after it gave up
    on this one, is not waiting for its answer."""


class StoreUnavailable(RuntimeError):
    """The store cannot be reached or did not answer in time (Redis down, paused, failing over),
    or a write was not acknowledged by the replicas it must reach (``redis_wait_replicas``):
    answered 503, like a lost session."""


@dataclass(frozen=True)
class SessionCounts:
    """How sessions ended, counted since the store was created (for the metrics exporter).

    ``expired`` and ``replaced`` are counted when the next open or close notices them.
    """

    opened: int = 0
    closed: int = 0
    expired: int = 0
    replaced: int = 0


@dataclass(frozen=True)
class StoreOptions:
    """What a store is opened with besides its setting: config.py's options of the same names
    (``session_ttl`` is ``ttl_seconds``). Each store reads the ones that concern it; None is the
    store's own default."""

    ttl_seconds: float = DEFAULT_TTL_SECONDS
    redis_timeout: float | None = None
    redis_wait_replicas: int = 0
    redis_wait_timeout: float | None = None


class SessionStore(Protocol):
    """Shared per-cycle state: what the service asks of a store (SessionCache, the verb handlers,
    the decision tally of ``/why``, ``/status``). SqliteStore, RedisStore and SentinelStore
    implement it and behave identically; store_url.SCHEMES names them, and the contract suite
    (tests/session, ``make_store``) runs against each one listed there.

    Besides the members below, a store:

    - survives pickling: it crosses ``fork`` (gunicorn's workers) and ``spawn`` (multiprocessing)
      as its settings (``__reduce__``), and each process makes its own connections; the copy
      reads and writes the same data;
    - is used by many threads at once, and by many processes (and replicas) on the same data;
      every change is atomic (an event never lands in a session another process replaced);
    - raises ``StoreUnavailable`` when it cannot be reached or does not answer in time, and
      ``SessionLost`` from ``head()`` when it knows the current session's writes may be lost (a
      failover); the web layer answers 503 for both. The ``tally_*`` methods may raise anything:
      their callers lose that part of ``/why``, never a decision.
    """

    #: Seconds after which a session whose onSessionClose never came is gone (``session_ttl``).
    ttl_seconds: float

    @classmethod
    def from_setting(cls, setting: str, options: StoreOptions) -> SessionStore:
        """The store a ``--session-store`` setting of this kind names (store_url.scheme_of has
        checked it), opened with ``options``. Connects lazily: no I/O until the first call."""
        ...

    # -- the session ---------------------------------------------------------------------------

    def begin_open(self) -> int:
        """A ticket for an onSessionOpen that has just arrived: greater than every ticket taken
        before it, by any worker or replica sharing the store (opens and closes are ordered by
        arrival, not by when they are stored)."""
        ...

    def open(self, snapshot: bytes, policy_version: str, policy_sources: dict[str, str],
             ticket: int | None = None) -> str:
        """Start a new session (fresh id, seq 0) replacing any previous one and its allocations;
        store ``policy_sources`` under ``policy_version`` (the only version kept). The new id.
        ``ticket``: the open's ``begin_open`` ticket (None: it arrived now); when an open or close
        with a greater one was stored first, raises OpenSuperseded and stores nothing."""
        ...

    def close(self) -> None:
        """End the current session; later calls see no session. A close arrives and is stored at
        once: it supersedes every open that arrived before it and is not stored yet."""
        ...

    def head(self) -> Head | None:
        """The current session, or None when none is open or it expired (``ttl_seconds`` after
        its open). The one read of every request."""
        ...

    def snapshot(self, session_id: str) -> bytes | None:
        """The snapshot stored at open, or None if ``session_id`` is not the current session."""
        ...

    def policy_sources(self, version: str) -> dict[str, str] | None:
        """The policy files stored under ``version`` by some open, or None."""
        ...

    # -- this cycle's events -------------------------------------------------------------------

    def allocate(self, session_id: str, task_uid: str, record: bytes) -> bool:
        """An AllocateFunc event: the task's net change goes up by one, unless its last event was
        an allocate too (a retry: the record is replaced). False (nothing stored) for a session
        that is not the current one."""
        ...

    def deallocate(self, session_id: str, task_uid: str, record: bytes) -> bool:
        """A DeallocateFunc event: the task's net change goes down by one, unless its last event
        was a deallocate too (a retry: nothing changes). ``record`` describes the task (its node,
        job and resources) for an eviction of a task allocated before the cycle. False for a
        session that is not the current one."""
        ...

    def allocations(self, session_id: str) -> list[tuple[int, bytes]]:
        """(net change, record) of every task whose net change is not 0 (empty for a stale session)."""
        ...

    def changes(self, session_id: str, after_seq: int) -> list[Change]:
        """The session's events after ``after_seq``, oldest first: the n-th event is the change
        that set ``seq`` to n, so a reader that applied ``after_seq`` of them reads only the new
        ones. Empty for a stale session."""
        ...

    def ended(self, session_id: str) -> bool:
        """Whether the store recorded ``session_id`` as closed, replaced or expired (a session
        the store has no trace of was lost, not ended); the last ``ENDED_KEPT`` are kept, and the
        current one once its TTL passed on the store's own clock (never the wall clock of the
        process asking: a wall-clock step is not an expiry)."""
        ...

    def session_counts(self) -> SessionCounts:
        """Sessions opened, closed, expired and replaced so far."""
        ...

    def mark_lost(self, session_id: str, seconds: float) -> None:
        """Record, for every worker and replica sharing the store, that ``session_id`` was lost
        (it vanished without ending: the store restarted empty, its file was replaced), for the
        next ``seconds`` (at most the rest of its TTL); the next open or close removes it."""
        ...

    def lost(self) -> str | None:
        """The session :meth:`mark_lost` recorded, while the record holds, else None."""
        ...

    # -- the decision tally of /why (session/tally.py) -----------------------------------------

    def tally_merge(self, cycle_id: str, opened_at: float, counts: dict[str, int],
                    firsts: dict[str, str], lasts: dict[str, str], dropped: int, keep: int,
                    max_entries: int) -> list[str] | None:
        """Add one worker's aggregate of a cycle, atomically: ``counts`` added, ``firsts`` set
        where absent, ``lasts`` replaced; at most ``max_entries`` entries (counts and notes) per
        cycle, the rest added to the cycle's dropped count with ``dropped``; the ``keep`` most
        recently opened cycles kept. Returns the keys of ``firsts`` that were new, or None when
        the cycle is older than every kept one (nothing stored)."""
        ...

    def tally_cycles(self) -> list[tuple[str, float, int]]:
        """(cycle id, opened at, entries dropped) of the kept cycles, newest first."""
        ...

    def tally_read(self, cycle_id: str, prefix: str) -> tuple[dict[str, int], dict[str, str]]:
        """A cycle's counts and notes whose key starts with ``prefix`` (not empty)."""
        ...


def new_session_id() -> str:
    """A fresh, unguessable session id (16 hex characters)."""
    return secrets.token_hex(8)


def new_tip() -> str:
    """A fresh id for one change (8 hex characters)."""
    return secrets.token_hex(4)


#: how many ended session ids a store remembers (enough for a worker that slept a few cycles)
ENDED_KEPT = 32
