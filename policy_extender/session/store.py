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


class SessionStore(Protocol):
    """Shared per-cycle state; SqliteStore and RedisStore behave identically."""

    ttl_seconds: float  # a session never closed is forgotten this long after its open

    def open(self, snapshot: bytes, policy_version: str, policy_sources: dict[str, str]) -> str:
        """Start a new session (fresh id, seq 0) replacing any previous one and its allocations."""

    def close(self) -> None:
        """End the current session; later calls see no session."""

    def head(self) -> Head | None:
        """The current session, or None when none is open or it expired."""

    def snapshot(self, session_id: str) -> bytes | None:
        """The snapshot stored at open, or None if ``session_id`` is not the current session."""

    def policy_sources(self, version: str) -> dict[str, str] | None:
        """The policy files stored under ``version`` by some open, or None."""

    def allocate(self, session_id: str, task_uid: str, record: bytes) -> bool:
        """An AllocateFunc event: the task's net change goes up by one, unless its last event was
        an allocate too (a retry: the record is replaced). False (nothing stored) for a session
        that is not the current one."""

    def deallocate(self, session_id: str, task_uid: str, record: bytes) -> bool:
        """A DeallocateFunc event: the task's net change goes down by one, unless its last event
        was a deallocate too (a retry: nothing changes). ``record`` describes the task (its node,
        job and resources) for an eviction of a task allocated before the cycle. False for a
        session that is not the current one."""

    def allocations(self, session_id: str) -> list[tuple[int, bytes]]:
        """(net change, record) of every task whose net change is not 0 (empty for a stale session)."""

    def changes(self, session_id: str, after_seq: int) -> list[Change]:
        """The session's events after ``after_seq``, oldest first: the n-th event is the change
        that set ``seq`` to n, so a reader that applied ``after_seq`` of them reads only the new
        ones. Empty for a stale session."""

    def ended(self, session_id: str) -> bool:
        """Whether the store recorded ``session_id`` as closed, replaced or expired (a session
        the store has no trace of was lost, not ended)."""

    def session_counts(self) -> SessionCounts:
        """Sessions opened, closed, expired and replaced so far."""


def new_session_id() -> str:
    """A fresh, unguessable session id (16 hex characters)."""
    return secrets.token_hex(8)


def new_tip() -> str:
    """A fresh id for one change (8 hex characters)."""
    return secrets.token_hex(4)


#: how many ended session ids a store remembers (enough for a worker that slept a few cycles)
ENDED_KEPT = 32
