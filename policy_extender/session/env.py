"""The ``Env`` a policy evaluates against (contract in docs/architecture.md).

``SessionEnv`` is one immutable picture of the open session at one ``seq``: the decoded snapshot
and this cycle's totals. A request takes one and keeps it, so everything it evaluates agrees,
while other threads may already be using a newer one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from policy_extender.session.counts import NO_SESSION_VIEW, CycleTotals, session_view
from policy_extender.session.store import Head


class Snapshot(Protocol):
    """What the session layer needs from a decoded snapshot (the wire layer's JobView/QueueView
    lookups). A job view exposes ``queue_name`` (schema field ``job.queue_name``)."""

    def job(self, uid: str) -> Any | None: ...

    def queue(self, name: str) -> Any | None: ...


#: Builds the ``session`` view of a rule: (totals, open, job_uid, queue_name, node_name) -> view.
SessionViewFactory = Callable[[CycleTotals, bool, "str | None", "str | None", "str | None"], Any]


def queue_name_of(snapshot: Snapshot, job_uid: str | None) -> str | None:
    """The queue name of the snapshot's job ``job_uid``, or None if the job is unknown."""
    job = snapshot.job(job_uid) if job_uid else None
    return getattr(job, "queue_name", None) if job is not None else None


class SessionEnv:
    """The open session as policies see it: jobs and queues of the snapshot, and the counters."""

    open = True

    def __init__(self, head: Head, snapshot: Snapshot, totals: CycleTotals,
                 make_session_view: SessionViewFactory = session_view) -> None:
        self.head = head
        self.snapshot = snapshot
        self.totals = totals
        self._make_session_view = make_session_view

    def job(self, uid: str) -> Any | None:
        return self.snapshot.job(uid) if uid else None

    def queue(self, name: str) -> Any | None:
        return self.snapshot.queue(name) if name else None

    def session_view(self, job_uid: str | None, queue_name: str | None, node_name: str | None) -> Any:
        """Counters for a rule; the queue defaults to the job's queue in the snapshot."""
        queue_name = queue_name or queue_name_of(self.snapshot, job_uid)
        return self._make_session_view(self.totals, True, job_uid, queue_name, node_name)


class NoSessionEnv:
    """The env with no open session: no jobs, no queues, zero counts."""

    open = False
    head = None

    def job(self, uid: str) -> None:
        return None

    def queue(self, name: str) -> None:
        return None

    def session_view(self, job_uid: str | None, queue_name: str | None, node_name: str | None) -> Any:
        return NO_SESSION_VIEW


NO_SESSION = NoSessionEnv()
