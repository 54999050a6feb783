"""This cycle's counters: what the allocations of a session add up to, per queue, job and node.

The values follow the ``counts`` and ``session`` types of ``policy_extender.schema``: a counts
object has ``tasks`` and one attribute per ``RESOURCE_SHORTHANDS`` name, ``counts["<resource>"]``
for any other resource, 0 when nothing was allocated, everything in whole units.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from policy_extender.schema import RESOURCE_SHORTHANDS
from policy_extender.session.allocation import Allocation


class CycleCounts:
    """Tasks and resources allocated in this cycle to one scope (all, a queue, a job, a node)."""

    __slots__ = ("tasks", "_resources")

    def __init__(self, tasks: int = 0, resources: Mapping[str, float] | None = None) -> None:
        self.tasks = tasks
        self._resources = dict(resources or {})

    def __getitem__(self, resource_name: str) -> float:
        return self._resources.get(resource_name, 0)

    def __getattr__(self, shorthand: str) -> float:
        if shorthand in RESOURCE_SHORTHANDS:
            return self._resources.get(RESOURCE_SHORTHANDS[shorthand], 0)
        raise AttributeError(shorthand)

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, CycleCounts) and self.tasks == other.tasks
                and self._resources == other._resources)

    def __repr__(self) -> str:
        return f"CycleCounts(tasks={self.tasks}, resources={self._resources})"


ZERO = CycleCounts()


@dataclass
class _Sum:
    tasks: int = 0
    resources: dict[str, float] = field(default_factory=dict)

    def add(self, allocation: Allocation) -> None:
        self.tasks += 1
        for name, amount in allocation.resources.items():
            self.resources[name] = self.resources.get(name, 0) + amount

    def freeze(self) -> CycleCounts:
        return CycleCounts(self.tasks, self.resources)


@dataclass(frozen=True)
class CycleTotals:
    """Everything allocated this cycle, and the same split by queue name, job UID and node name."""

    allocated: CycleCounts = field(default_factory=CycleCounts)
    queues: dict[str, CycleCounts] = field(default_factory=dict)
    jobs: dict[str, CycleCounts] = field(default_factory=dict)
    nodes: dict[str, CycleCounts] = field(default_factory=dict)


def total(allocations: Iterable[Allocation], queue_of_job: Callable[[str], str | None]) -> CycleTotals:
    """Add up ``allocations``; ``queue_of_job`` maps a job UID to its queue name (from the snapshot,
    since an allocate event names the task's job, not its queue)."""
    everything, queues, jobs, nodes = _Sum(), {}, {}, {}
    for allocation in allocations:
        everything.add(allocation)
        _scope(jobs, allocation.job_uid).add(allocation)
        _scope(queues, queue_of_job(allocation.job_uid)).add(allocation)
        _scope(nodes, allocation.node_name).add(allocation)
    return CycleTotals(everything.freeze(), _frozen(queues), _frozen(jobs), _frozen(nodes))


class _Discard:
    def add(self, allocation: Allocation) -> None:
        pass


_DISCARD = _Discard()


def _scope(sums: dict[str, _Sum], key: str | None) -> _Sum | _Discard:
    """The running sum for ``key``; an unknown key (no queue, no node yet) is not counted."""
    if not key:
        return _DISCARD
    return sums.setdefault(key, _Sum())


def _frozen(sums: dict[str, _Sum]) -> dict[str, CycleCounts]:
    return {key: one.freeze() for key, one in sums.items()}


@dataclass(frozen=True)
class CycleSessionView:
    """The ``session`` object a rule reads (schema type ``session``), for one task/job/node."""

    open: bool
    allocated: CycleCounts
    queue: CycleCounts
    job: CycleCounts
    node: CycleCounts
    queues: dict[str, CycleCounts]
    jobs: dict[str, CycleCounts]
    nodes: dict[str, CycleCounts]


def session_view(totals: CycleTotals, open: bool, job_uid: str | None, queue_name: str | None,
                 node_name: str | None) -> CycleSessionView:
    """The session view for a rule about ``job_uid`` in ``queue_name`` on ``node_name``."""
    return CycleSessionView(
        open=open, allocated=totals.allocated,
        queue=totals.queues.get(queue_name or "", ZERO), job=totals.jobs.get(job_uid or "", ZERO),
        node=totals.nodes.get(node_name or "", ZERO),
        queues=totals.queues, jobs=totals.jobs, nodes=totals.nodes)


NO_SESSION_VIEW = session_view(CycleTotals(), False, None, None, None)
