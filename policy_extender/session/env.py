"""The ``Env`` of an open session (contract in docs/architecture.md).

``SessionEnv`` is one immutable picture of the open session at one ``seq``: the decoded snapshot
and this cycle's counters and lists of allocations and evictions (``counts.Counters``). A request takes one and keeps it, so everything it evaluates agrees,
while other threads may already use a newer one. With no session the env is the wire layer's
``NO_SESSION``.
"""

from __future__ import annotations

from typing import Any, Protocol

from policy_extender.session.store import Head
from policy_extender.session.counts import Counters
from policy_extender.wire.session_views import SessionView
from policy_extender.wire.snapshot import Snapshot


class JobsAndQueues(Protocol):
    """What the session layer needs from a decoded snapshot (``wire.snapshot.Snapshot``): job and
    queue lookups; a job view exposes ``queue_name`` (schema field ``job.queue_name``)."""

    def job(self, uid: str) -> Any | None: ...

    def queue(self, name: str) -> Any | None: ...

    def cluster_facts(self) -> Any: ...


def queue_name_of(snapshot: JobsAndQueues, job_uid: str | None) -> str | None:
    """The queue name of the snapshot's job ``job_uid``, or None if the job is unknown."""
    job = snapshot.job(job_uid) if job_uid else None
    return getattr(job, "queue_name", None) if job is not None else None


class SessionEnv:
    """The open session as policies see it: the snapshot's jobs, queues and cluster-wide facts,
    and the counters."""

    open = True

    def __init__(self, head: Head, snapshot: JobsAndQueues, counters: Counters) -> None:
        self.head = head
        self.snapshot = snapshot
        self.counters = counters
        self._cluster: Any = None
        #: what the views of this picture resolve ``job`` and ``queue`` through (None: the snapshot)
        self._views_env: _ViewsEnv | None = None
        if counters.placed.size or counters.evicted.size:  # jobs net of the events: one C call once built
            self._views_env = _ViewsEnv(snapshot, _NetJobs(snapshot, counters))
            self.job = self._views_env.job  # type: ignore[method-assign, assignment]  # a dict's own lookup
        elif type(snapshot) is Snapshot:  # its own job() is this one's (None for ""): a call less
            self.job = snapshot.job  # type: ignore[method-assign]  # the snapshot's own bound method

    def job(self, uid: str) -> Any | None:
        """The snapshot's job ``uid``, net of this cycle's events on its tasks (``wire.views.net_job``:
        a task placed is Allocated or Pipelined on its node, one evicted Releasing)."""
        return self.snapshot.job(uid) if uid else None

    def queue(self, name: str) -> Any | None:
        return self.snapshot.queue(name) if name else None

    def session_view(self, job_uid: str | None, queue_name: str | None,
                     node_name: str | None) -> SessionView:
        """Counters and lists for a rule; the queue defaults to the job's queue in the snapshot."""
        queue_name = queue_name or queue_name_of(self.snapshot, job_uid)
        return self.counters.session_view(job_uid, queue_name, node_name)

    def cluster_view(self) -> Any:
        """The ``cluster`` root: the snapshot's facts net of this picture's allocations per node
        (``wire.cluster``), built on first use and kept with this picture."""
        cluster = self._cluster
        if cluster is None:
            counters = self.counters
            cluster = self._cluster = self.snapshot.cluster_facts().view(counters.by_node, counters.placed,
                                                                         counters.evicted, self._views_env)
        return cluster

    def __repr__(self) -> str:
        return f"SessionEnv({self.head.session_id} seq {self.head.seq}, {self.snapshot!r})"


class _NetJobs(dict):
    """Job UID -> the snapshot's job net of one picture's events on its tasks, each built on its
    first lookup (``__missing__``; two threads may both build one: the same view either way) and
    then found by the dict's own lookup. An unknown UID reads None and is not kept. The views it
    builds resolve through the snapshot, and it holds no env: a picture replaced by the next is
    freed by its reference count, no reference cycle keeps it until a collection."""

    def __init__(self, snapshot: JobsAndQueues, counters: Counters) -> None:
        super().__init__()
        self._snapshot, self._counters = snapshot, counters

    def __missing__(self, uid: str) -> Any | None:
        job = self._snapshot.job(uid) if uid else None
        if job is None:
            return None
        counters = self._counters
        found = self[uid] = job.net_of(counters.placed.bucket("job", uid), counters.evicted.bucket("job", uid))
        return found


class _ViewsEnv:
    """What the ``cluster`` node views of a picture with events resolve ``task.job`` (net, through
    ``_NetJobs``) and ``job.queue`` (the snapshot's) through."""

    open = True
    __slots__ = ("job", "queue")

    def __init__(self, snapshot: JobsAndQueues, jobs: _NetJobs) -> None:
        self.job, self.queue = jobs.__getitem__, snapshot.queue
