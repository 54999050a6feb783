"""The session store contract: what every shared store (SQLite, Redis) offers, and its records.

A session is the span onSessionOpen -> onSessionClose of one Volcano scheduling cycle. Volcano
sends no session id, so the store itself names the current session; every gunicorn worker (and,
with Redis, every replica) reads the same current session through it.

The common request costs one call, ``head()``: a worker compares the head it cached with the one
it reads and re-reads the snapshot only when ``session_id`` changed, the allocations only when
``seq`` changed.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import NamedTuple, Protocol

#: Seconds after which a session whose onSessionClose never arrived is treated as closed.
#: Volcano cycles take about a second; five minutes only catches a scheduler that died mid-cycle.
DEFAULT_TTL_SECONDS = 300.0


#: One event of the cycle: (task UID, allocation record) for an allocate that inserted or replaced,
#: (task UID, None) for a deallocate that removed one.
Change = tuple[str, "bytes | None"]


class Head(NamedTuple):
    """The current session: its id, its change counter and the policy version pinned at open."""

    session_id: str
    seq: int
    policy_version: str
    opened_at: float


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
        """Insert or replace the task's allocation; False (nothing stored) for a stale session."""

    def deallocate(self, session_id: str, task_uid: str) -> bool:
        """Remove the task's allocation if present; False for a stale session."""

    def allocations(self, session_id: str) -> list[bytes]:
        """Every allocation record of the session (empty for a stale session)."""

    def changes(self, session_id: str, after_seq: int) -> list[Change]:
        """The session's events after ``after_seq``, oldest first: the n-th event is the change
        that set ``seq`` to n, so a reader that applied ``after_seq`` of them reads only the new
        ones. Empty for a stale session."""

    def session_counts(self) -> SessionCounts:
        """Sessions opened, closed, expired and replaced so far."""


def new_session_id() -> str:
    """A fresh, unguessable session id (16 hex characters)."""
    return secrets.token_hex(8)
