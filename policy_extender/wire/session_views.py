"""Session state as policies see it: ``SessionView``, ``Counts`` tallies, the list of this cycle's
allocations (``Placements``), and two Envs.

An Env resolves ``task.job``, ``task.queue`` and ``job.queue`` and builds the ``session`` root
(see "Env" in docs/architecture.md). ``NO_SESSION`` is used when no session is open;
``SnapshotEnv`` is an in-memory one (tests, the fixture runner); the shared session store builds
its own on ``SessionView`` and ``Placements`` (``session/counts.py``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from operator import attrgetter
from typing import Any, NamedTuple

from policy_extender.schema import INDEXED

from .paths import TASK_STATUSES
from .quantity import whole
from .resources import EMPTY, NO_COUNTS, Counts, Resources, field_of


class PlacedTask(NamedTuple):
    """One task allocated in this cycle; ``resources`` in whole units by full resource name;
    ``status`` and ``task`` as an ``AllocationRecord`` keeps them (``wire.placed``)."""

    task_uid: str
    job_uid: str
    queue_name: str
    node_name: str
    resources: Mapping[str, int | float]
    status: int = 0
    task: Mapping[str, Any] | None = None


def _map(raw: Any, *keys: str) -> dict:
    value = raw
    for key in keys:
        value = value.get(key) if isinstance(value, dict) else None
    return value if isinstance(value, dict) else {}


class AllocationView:
    """One task of this cycle's ``session.allocations`` (or ``session.evictions``): schema type
    ``allocation``. Identifiers the event did not carry (a task without a job, a job the snapshot
    does not know, so no queue) are null. ``_seq`` orders the list: the event that listed it.
    ``raw``: the event's task as its record keeps it (Go keys, ``wire.placed``; None for a record
    written before records kept it), read by the task's own fields (``labels``, ``name``, ...)."""

    __slots__ = ("task", "job", "queue", "node", "requests", "_seq", "raw")

    def __init__(self, task: str | None, job: str | None, queue: str | None, node: str | None,
                 requests: Resources = EMPTY, seq: int = 0, raw: Mapping[str, Any] | None = None):
        self.task, self.job, self.queue, self.node = task or None, job or None, queue or None, node or None
        self.requests, self._seq, self.raw = requests, seq, raw

    name = property(lambda self: field_of(self.raw, "Name") or None)
    namespace = property(lambda self: field_of(self.raw, "Namespace") or None)
    role = property(lambda self: field_of(self.raw, "TaskRole") or None)
    priority = property(lambda self: field_of(self.raw, "Priority") or 0)
    labels = property(lambda self: _map(self.raw, "Pod", "metadata", "labels"))
    annotations = property(lambda self: _map(self.raw, "Pod", "metadata", "annotations"))
    status = property(lambda self: TASK_STATUSES.get(field_of(self.raw, "Status")))

    def task_raw(self) -> dict[str, Any]:
        """The task as a node's ``tasks`` hold it (a ``TaskView``'s raw): what the record kept of
        it, with the record's own UID, job and node (and status, ``raw_of``)."""
        return {**(self.raw or {}), "UID": self.task, "Job": self.job or "", "NodeName": self.node or ""}

    def __repr__(self) -> str:
        return (f"AllocationView(task={self.task!r}, job={self.job!r}, queue={self.queue!r}, "
                f"node={self.node!r}, requests={self.requests!r})")


_SEQ = attrgetter("_seq")
_NOTHING: list = []


class Placements:
    """This cycle's allocations (or evictions) as one list, and indexed by job, queue and node.

    Immutable once built: ``changed`` returns new Placements that share every bucket it did not
    touch, so a catch-up costs the buckets its events touched plus a copy of the three bucket
    maps (one entry per job, queue and node), never a pass over every allocation. The whole list,
    in the order of the events that listed its tasks, is put together from the buckets the first
    time a rule reads it unindexed (``items``), once per Placements. Every bucket keeps that order,
    so an aggregate over a bucket visits the same elements in the same order as one over the list
    that skips the others (``lang.compiler``, the index).
    """

    __slots__ = ("size", "_by", "_items")

    def __init__(self, views: Iterable[AllocationView] = ()):
        """From scratch; ``views`` in list order (their ``_seq`` must increase)."""
        by: dict[str, dict] = {name: {} for name in INDEXED}
        size = 0
        for view in views:
            size += 1
            for name, buckets in by.items():
                buckets.setdefault(getattr(view, name), []).append(view)
        self.size, self._by = size, by
        self._items: list[AllocationView] | None = None

    def items(self) -> list[AllocationView]:
        """The whole list (built on first use; every bucket of ``job`` holds each view once)."""
        items = self._items
        if items is None:
            items = [view for bucket in self._by["job"].values() for view in bucket]
            items.sort(key=_SEQ)
            self._items = items  # the same list whichever thread built it first
        return items

    def keys(self, name: str) -> Iterable[object]:
        """The values of field ``name`` (``INDEXED``) that some view has."""
        return self._by[name].keys()

    def bucket(self, name: str, key: object) -> list[AllocationView]:
        """The views whose field ``name`` equals ``key`` (``==`` on strings and null), in order."""
        if key is not None and type(key) is not str:
            return _NOTHING  # a field is a string or null: nothing else equals it
        return self._by[name].get(key, _NOTHING)

    def changed(self, removed: Iterable[AllocationView], added: Iterable[AllocationView]) -> Placements:
        """New Placements without the views ``removed`` (found by task, job, queue and node) and
        with ``added`` at the end (their ``_seq`` above every listed one), applied in that order."""
        removed, added = list(removed), list(added)
        by = {name: dict(buckets) for name, buckets in self._by.items()}
        owned: set[tuple[str, object]] = set()  # buckets copied in this call, safe to edit in place
        size = self.size

        def edit(name: str, key: object) -> list:
            bucket = by[name].get(key, _NOTHING)
            if (name, key) not in owned:
                bucket = by[name][key] = list(bucket)
                owned.add((name, key))
            return bucket

        for view in removed:
            for name in INDEXED:
                key = getattr(view, name)
                if key not in by[name]:
                    continue
                bucket = edit(name, key)
                kept = [v for v in bucket if v.task != view.task]
                if name == "job":
                    size -= len(bucket) - len(kept)
                bucket[:] = kept
                if not bucket:
                    del by[name][key]
                    owned.discard((name, key))
        for view in added:
            for name in INDEXED:
                edit(name, getattr(view, name)).append(view)
            size += 1
        new = Placements.__new__(Placements)
        new.size, new._by, new._items = size, by, None
        if self._items is not None:  # a rule reads the whole list: keep it built (one list copy)
            gone = {view.task for view in removed}
            new._items = [v for v in self._items if v.task not in gone] if gone else list(self._items)
            new._items.extend(added)
        return new

    def __len__(self) -> int:
        return self.size

    def __repr__(self) -> str:
        return f"Placements({self.size})"


NO_PLACEMENTS = Placements()


class SessionView:
    """The ``session`` root of a rule: counters of this cycle's allocations, and the list of them
    (``allocations``: net +1) and of this cycle's evictions (``evictions``: net -1)."""

    __slots__ = ("open", "allocated", "queue", "job", "node", "queues", "jobs", "nodes", "_placed", "_evicted")

    def __init__(self, open: bool = False, allocated: Counts = NO_COUNTS, queue: Counts = NO_COUNTS,
                 job: Counts = NO_COUNTS, node: Counts = NO_COUNTS,
                 queues: Mapping[str, Counts] | None = None, jobs: Mapping[str, Counts] | None = None,
                 nodes: Mapping[str, Counts] | None = None,
                 placed: Placements = NO_PLACEMENTS, evicted: Placements = NO_PLACEMENTS):
        self.open, self.allocated = open, allocated
        self.queue, self.job, self.node = queue, job, node
        self.queues, self.jobs, self.nodes = dict(queues or {}), dict(jobs or {}), dict(nodes or {})
        self._placed, self._evicted = placed, evicted

    @property
    def allocations(self) -> list[AllocationView]:
        """The tasks placed this cycle (net +1), in the order of the events that placed them."""
        return self._placed.items()

    @property
    def evictions(self) -> list[AllocationView]:
        """The tasks evicted this cycle that ran before it (net -1), in event order."""
        return self._evicted.items()

    def placements(self, name: str) -> Placements:
        """The indexed form of ``allocations`` or ``evictions`` (what the compiler's index reads)."""
        return self._placed if name == "allocations" else self._evicted

    def __repr__(self) -> str:
        return f"SessionView(open={self.open}, allocated={self.allocated!r})"


def _net(placed: list[PlacedTask], evicted: list[PlacedTask]) -> Counts:
    """The allocations' counts minus the evictions' (a key that nets to nothing stays, as zero)."""
    plus, minus = Counts.from_allocations(placed), Counts.from_allocations(evicted)
    amounts = plus.as_dict()
    for name, amount in minus.as_dict().items():
        amounts[name] = whole(round(amounts.get(name, 0) - amount, 9))
    return Counts(plus.tasks - minus.tasks, amounts)


def _group(placed: list[PlacedTask], evicted: list[PlacedTask], index: int) -> dict[str, Counts]:
    groups: dict[str, tuple[list, list]] = {}
    for sign, allocations in enumerate((placed, evicted)):
        for allocation in allocations:
            groups.setdefault(allocation[index], ([], []))[sign].append(allocation)  # type: ignore[arg-type]  # index: a str field
    return {key: _net(*group) for key, group in groups.items() if key}


def allocation_view(allocation: PlacedTask, seq: int = 0) -> AllocationView:
    """The list element of ``allocation`` (resources in whole units by full name)."""
    resources = allocation.resources
    return AllocationView(allocation.task_uid, allocation.job_uid, allocation.queue_name,
                          allocation.node_name,
                          resources if isinstance(resources, Resources) else Resources(resources), seq,
                          raw_of(allocation))


def raw_of(allocation: Any) -> dict[str, Any] | None:
    """The record's task (``task``) with its ``status`` in it; None when it kept neither."""
    raw, status = getattr(allocation, "task", None), getattr(allocation, "status", 0)
    if not status or (raw is not None and "Status" in raw):
        return raw
    return {**(raw or {}), "Status": status}


class CycleAllocations:
    """This cycle's allocations (and evictions: tasks that ran before the cycle, net -1) summed
    once (total, by queue, job and node) and listed, then viewed cheaply."""

    __slots__ = ("total", "by_queue", "by_job", "by_node", "placed", "evicted")

    def __init__(self, allocations: Iterable = (), evictions: Iterable = ()):
        allocations = [PlacedTask(*a) for a in allocations]
        evictions = [PlacedTask(*a) for a in evictions]
        self.total = _net(allocations, evictions)
        self.by_queue = _group(allocations, evictions, 2)
        self.by_job = _group(allocations, evictions, 1)
        self.by_node = _group(allocations, evictions, 3)
        self.placed = Placements(allocation_view(a, i) for i, a in enumerate(allocations))
        self.evicted = Placements(allocation_view(a, i + len(allocations))
                                  for i, a in enumerate(evictions))

    def session_view(self, job_uid: str | None, queue_name: str | None, node_name: str | None,
                     open: bool = True) -> SessionView:
        return SessionView(open, self.total, self.by_queue.get(queue_name or "", NO_COUNTS),
                           self.by_job.get(job_uid or "", NO_COUNTS),
                           self.by_node.get(node_name or "", NO_COUNTS),
                           self.by_queue, self.by_job, self.by_node, self.placed, self.evicted)


class NoCluster:
    """The ``cluster`` root with no session open (``wire.cluster.ClusterView`` otherwise): no
    nodes, no queues, no jobs, zero totals."""

    __slots__ = ()
    nodes = property(lambda self: [])
    node_count = 0
    allocatable = idle = used = EMPTY
    queues = property(lambda self: {})
    jobs = property(lambda self: {})

    def __repr__(self) -> str:
        return "NO_CLUSTER"


NO_CLUSTER = NoCluster()


class NoSession:
    """The Env when no session is open: no jobs, no queues, zero counts, no cluster."""

    open = False
    _view = SessionView()

    def cluster_view(self) -> NoCluster:
        return NO_CLUSTER

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

    def __init__(self, jobs: Mapping | tuple[()] = (), queues: Mapping | tuple[()] = (), allocations: Iterable = (),
                 evictions: Iterable = ()):
        self._jobs = {uid: view.with_env(self) for uid, view in dict(jobs).items()}
        self._queues = {name: view.with_env(self) for name, view in dict(queues).items()}
        self._queues_by_uid = {view.uid: view for view in self._queues.values() if view.uid}
        self.tally = CycleAllocations(allocations, evictions)
        #: the ``cluster`` root's facts (a ``wire.cluster.ClusterFacts``), or None: no cluster
        self.cluster_facts = None

    def job(self, uid: str):
        """The job ``uid``, net of this cycle's events on its tasks (``views.net_job``)."""
        job = self._jobs.get(uid) if uid else None
        if job is None:
            return None
        return job.net_of(self.tally.placed.bucket("job", uid), self.tally.evicted.bucket("job", uid), self)

    def queue(self, name: str):
        if not name:
            return None
        return self._queues.get(name) or self._queues_by_uid.get(name)

    def session_view(self, job_uid, queue_name, node_name) -> SessionView:
        return self.tally.session_view(job_uid, queue_name, node_name, open=True)

    def cluster_view(self):
        facts = self.cluster_facts
        return NO_CLUSTER if facts is None else facts.view(self.tally.by_node, self.tally.placed,
                                                            self.tally.evicted, self)
