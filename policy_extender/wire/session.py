"""Session state as policies see it: ``SessionView`` and ``Counts`` tallies, and two Envs.

An Env resolves ``task.job``, ``task.queue`` and ``job.queue`` and builds the ``session`` root
(see "Env" in docs/architecture.md). ``NO_SESSION`` is used when no session is open;
``SnapshotEnv`` is an in-memory one (tests, the fixture runner); the shared session store builds
its own on ``Tally`` and ``SessionView``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import NamedTuple

from .resources import NO_COUNTS, Counts


class Allocation(NamedTuple):
    """One task allocated in this cycle; ``resources`` in whole units by full resource name."""

    task_uid: str
    job_uid: str
    queue_name: str
    node_name: str
    resources: Mapping[str, int | float]


class SessionView:
    """The ``session`` root of a rule: counters of this cycle's allocations."""

    __slots__ = ("open", "allocated", "queue", "job", "node", "queues", "jobs", "nodes")

    def __init__(self, open: bool = False, allocated: Counts = NO_COUNTS, queue: Counts = NO_COUNTS,
                 job: Counts = NO_COUNTS, node: Counts = NO_COUNTS,
                 queues: Mapping[str, Counts] | None = None, jobs: Mapping[str, Counts] | None = None,
                 nodes: Mapping[str, Counts] | None = None):
        self.open, self.allocated = open, allocated
        self.queue, self.job, self.node = queue, job, node
        self.queues, self.jobs, self.nodes = dict(queues or {}), dict(jobs or {}), dict(nodes or {})

    def __repr__(self) -> str:
        return f"SessionView(open={self.open}, allocated={self.allocated!r})"


def _group(allocations: list[Allocation], index: int) -> dict[str, Counts]:
    groups: dict[str, list] = {}
    for allocation in allocations:
        groups.setdefault(allocation[index], []).append(allocation)
    return {key: Counts.from_allocations(group) for key, group in groups.items() if key}


class Tally:
    """This cycle's allocations summed once (total, by queue, job and node), then viewed cheaply."""

    __slots__ = ("total", "by_queue", "by_job", "by_node")

    def __init__(self, allocations: Iterable = ()):
        allocations = [Allocation(*a) for a in allocations]
        self.total = Counts.from_allocations(allocations)
        self.by_queue = _group(allocations, 2)
        self.by_job = _group(allocations, 1)
        self.by_node = _group(allocations, 3)

    def session_view(self, job_uid: str | None, queue_name: str | None, node_name: str | None,
                     open: bool = True) -> SessionView:
        return SessionView(open, self.total, self.by_queue.get(queue_name or "", NO_COUNTS),
                           self.by_job.get(job_uid or "", NO_COUNTS),
                           self.by_node.get(node_name or "", NO_COUNTS),
                           self.by_queue, self.by_job, self.by_node)


class NoSession:
    """The Env when no session is open: no jobs, no queues, zero counts."""

    open = False
    _view = SessionView()

    def job(self, uid: str):
        return None

    def queue(self, name: str):
        return None

    def session_view(self, job_uid, queue_name, node_name) -> SessionView:
        return self._view

    def __repr__(self) -> str:
        return "NO_SESSION"


NO_SESSION = NoSession()


class SnapshotEnv:
    """An open session held in memory: jobs by UID, queues by name, and this cycle's allocations.

    The views given are rebound to this env (``with_env``) so ``job.queue`` resolves here.
    """

    open = True

    def __init__(self, jobs: Mapping = (), queues: Mapping = (), allocations: Iterable = ()):
        self._jobs = {uid: view.with_env(self) for uid, view in dict(jobs).items()}
        self._queues = {name: view.with_env(self) for name, view in dict(queues).items()}
        self._queues_by_uid = {view.uid: view for view in self._queues.values() if view.uid}
        self.tally = Tally(allocations)

    def job(self, uid: str):
        return self._jobs.get(uid) if uid else None

    def queue(self, name: str):
        if not name:
            return None
        return self._queues.get(name) or self._queues_by_uid.get(name)

    def session_view(self, job_uid, queue_name, node_name) -> SessionView:
        return self.tally.session_view(job_uid, queue_name, node_name, open=True)
