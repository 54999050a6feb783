"""This cycle's counters, kept up to date one allocate/deallocate event at a time.

A cycle may allocate thousands of tasks, and every event bumps ``seq``; adding everything up
again after each event would cost O(allocations) per request. ``Counters`` is immutable: ``apply``
returns new counters in which only the queue, job and node an event touched are new objects, so
a request keeps a consistent picture while the next one moves on.

Counts are net (store.py): an eviction shifts its task out (-1), so a key may go below zero.

The values are the wire layer's ``Counts`` and ``SessionView`` (the schema's ``counts`` and
``session`` types). An allocate event names the task's job, not its queue: the queue comes from
the session snapshot through ``queue_of_job``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from policy_extender.session.allocation import Allocation
from policy_extender.wire.quantity import whole
from policy_extender.wire.resources import NO_COUNTS, Counts
from policy_extender.wire.session import SessionView

#: One change to the counters: an allocation and how many times to add it (-1 takes it away).
Shift = tuple[Allocation, int]


def shifted(counts: Counts, resources: Mapping[str, float], sign: int) -> Counts:
    """``counts`` plus ``sign`` tasks using ``resources`` each (sign -1 takes one away)."""
    amounts = counts.as_dict()
    for name, amount in resources.items():
        # rounding keeps add-then-subtract from leaving 1e-16 crumbs behind
        amounts[name] = whole(round(amounts.get(name, 0) + sign * amount, 9))
    return Counts(counts.tasks + sign, amounts)


@dataclass(frozen=True)
class Counters:
    """Allocated this cycle: in total, by queue name, by job UID and by node name."""

    total: Counts = NO_COUNTS
    by_queue: dict[str, Counts] = field(default_factory=dict)
    by_job: dict[str, Counts] = field(default_factory=dict)
    by_node: dict[str, Counts] = field(default_factory=dict)

    def session_view(self, job_uid: str | None, queue_name: str | None,
                     node_name: str | None) -> SessionView:
        return SessionView(True, self.total, self.by_queue.get(queue_name or "", NO_COUNTS),
                           self.by_job.get(job_uid or "", NO_COUNTS),
                           self.by_node.get(node_name or "", NO_COUNTS),
                           self.by_queue, self.by_job, self.by_node)

    def apply(self, shifts: Iterable[Shift],
              queue_of_job: Callable[[str], str | None]) -> Counters:
        """New counters after ``shifts``: (allocation, n) adds the allocation n times (n < 0
        takes it away)."""
        draft = _Draft(self, queue_of_job)
        for allocation, n in shifts:
            if n:
                draft.shift(allocation, n)
        return draft.freeze()


class _Draft:
    """Counters being changed: copies of the maps, edited in place, then frozen."""

    def __init__(self, base: Counters, queue_of_job: Callable[[str], str | None]) -> None:
        self.total = base.total
        self.by_queue, self.by_job = dict(base.by_queue), dict(base.by_job)
        self.by_node = dict(base.by_node)
        self._queue_of_job = queue_of_job

    def shift(self, allocation: Allocation, sign: int) -> None:
        resources = allocation.resources
        self.total = shifted(self.total, resources, sign)
        _shift(self.by_queue, self._queue_of_job(allocation.job_uid), resources, sign)
        _shift(self.by_job, allocation.job_uid, resources, sign)
        _shift(self.by_node, allocation.node_name, resources, sign)

    def freeze(self) -> Counters:
        return Counters(self.total, self.by_queue, self.by_job, self.by_node)


def _shift(counts_by: dict[str, Counts], key: str | None, resources: Mapping[str, float],
           sign: int) -> None:
    """Shift the counts of ``key``; an empty key (unknown queue, no node) is not counted, and a
    key whose changes net to nothing is dropped (it reads as absent, like one never touched)."""
    if not key:
        return
    counts = shifted(counts_by.get(key, NO_COUNTS), resources, sign)
    if counts.tasks or any(counts.as_dict().values()):
        counts_by[key] = counts
    else:
        counts_by.pop(key, None)


def count(allocations: Iterable[Allocation], queue_of_job: Callable[[str], str | None]) -> Counters:
    """Counters of ``allocations`` from scratch (tests and checks)."""
    return Counters().apply(((allocation, 1) for allocation in allocations), queue_of_job)
