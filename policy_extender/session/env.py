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
        #: job UID -> the snapshot's job net of this picture's events on its tasks (on first use)
        self._net_jobs: dict[str, Any] | None = None
        if counters.placed.size or counters.evicted.size:
            self._net_jobs = {}
        elif type(snapshot) is Snapshot:  # its own job() is this one's (None for ""): a call less
            self.job = snapshot.job  # type: ignore[method-assign]  # the snapshot's own bound method

    def job(self, uid: str) -> Any | None:
        """The snapshot's job ``uid``, net of this cycle's events on its tasks (``wire.views.net_job``:
        a task placed is Allocated or Pipelined on its node, one evicted Releasing)."""
        job = self.snapshot.job(uid) if uid else None
        net = self._net_jobs
        if job is None or net is None:
            return job
        found = net.get(uid)
        if found is None:  # two threads may both build it: the same view either way
            counters = self.counters
            found = net[uid] = job.net_of(counters.placed.bucket("job", uid), counters.evicted.bucket("job", uid),
                                          self)
        return found

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
                                                                         counters.evicted, self)
        return cluster

    def __repr__(self) -> str:
        return f"SessionEnv({self.head.session_id} seq {self.head.seq}, {self.snapshot!r})"
