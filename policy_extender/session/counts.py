"""This cycle's counters, kept up to date one allocate/deallocate event at a time.

A cycle may allocate thousands of tasks, and every event bumps ``seq``; adding everything up
again after each event would cost O(allocations) per request. ``Counters`` is immutable: ``apply``
returns new counters in which only the queue, job and node an event touched are new objects, so
a request keeps a consistent picture while the next one moves on.

Counts are net (store.py): an eviction shifts its task out (-1), so a key may go below zero.

Beside the counts, ``Counters`` keeps the list of this cycle's allocations (tasks at net +1) and
of its evictions (net -1) as ``Placements``, indexed by job, queue and node, changed by ``moved``
in the same all-or-nothing way: only the buckets an event touched are new.

The values are the wire layer's ``Counts`` and ``SessionView`` (the schema's ``counts`` and
``session`` types). An allocate event names the task's job, not its queue: the queue comes from
the session snapshot through ``queue_of_job``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import NamedTuple

from policy_extender.session.allocation import Allocation
from policy_extender.wire.quantity import whole
from policy_extender.wire.resources import NO_COUNTS, Counts, Resources
from policy_extender.wire.session_views import NO_PLACEMENTS, AllocationView, Placements, SessionView, raw_of

#: One change to the counters: an allocation and how many times to add it (-1 takes it away).
Shift = tuple[Allocation, int]


class Move(NamedTuple):
    """One event as the cache applied it: the task's (net, allocation) before it (None: never
    seen this cycle) and after it, and the event's ``seq`` (orders the lists)."""

    task_uid: str
    before: tuple[int, Allocation] | None
    after: tuple[int, Allocation]
    seq: int


def shifted(counts: Counts, resources: Mapping[str, float], sign: int) -> Counts:
    """``counts`` plus ``sign`` tasks using ``resources`` each (sign -1 takes one away)."""
    amounts = counts.as_dict()
    for name, amount in resources.items():
        # rounding keeps add-then-subtract from leaving 1e-16 crumbs behind
        amounts[name] = whole(round(amounts.get(name, 0) + sign * amount, 9))
    return Counts(counts.tasks + sign, amounts)


@dataclass(frozen=True)
class Counters:
    """Allocated this cycle: in total, by queue name, by job UID and by node name; and the tasks
    placed (``placed``, net +1) and evicted (``evicted``, net -1), listed."""

    total: Counts = NO_COUNTS
    by_queue: dict[str, Counts] = field(default_factory=dict)
    by_job: dict[str, Counts] = field(default_factory=dict)
    by_node: dict[str, Counts] = field(default_factory=dict)
    placed: Placements = NO_PLACEMENTS
    evicted: Placements = NO_PLACEMENTS

    def session_view(self, job_uid: str | None, queue_name: str | None,
                     node_name: str | None) -> SessionView:
        return SessionView(True, self.total, self.by_queue.get(queue_name or "", NO_COUNTS),
                           self.by_job.get(job_uid or "", NO_COUNTS),
                           self.by_node.get(node_name or "", NO_COUNTS),
                           self.by_queue, self.by_job, self.by_node, self.placed, self.evicted)

    def moved(self, moves: Iterable[Move], queue_of_job: Callable[[str], str | None]) -> Counters:
        """New counters and lists after ``moves`` (in event order): a task's previous state is
        taken out, its new one put in, of the counts and of the list its net puts it in."""
        shifts: list[Shift] = []
        first: dict[str, tuple[int, Allocation] | None] = {}  # task -> its state before the batch
        last: dict[str, Move] = {}  # task -> its last move of the batch
        for move in moves:
            if move.before is not None and move.before[0]:
                shifts.append((move.before[1], -move.before[0]))
            if move.after[0]:
                shifts.append((move.after[1], move.after[0]))
            first.setdefault(move.task_uid, move.before)
            last[move.task_uid] = move
        out: tuple[list, list] = ([], [])  # views leaving placed, evicted
        into: tuple[list, list] = ([], [])
        for task_uid, before in first.items():
            if before is not None and before[0]:
                out[before[0] < 0].append(_view(task_uid, before[1], queue_of_job, 0))
        for move in sorted(last.values(), key=lambda m: m.seq):
            net, allocation = move.after
            if net:
                into[net < 0].append(_view(move.task_uid, allocation, queue_of_job, move.seq))
        counted = self.apply(shifts, queue_of_job)
        placed = self.placed.changed(out[0], into[0]) if out[0] or into[0] else self.placed
        evicted = self.evicted.changed(out[1], into[1]) if out[1] or into[1] else self.evicted
        return Counters(counted.total, counted.by_queue, counted.by_job, counted.by_node, placed, evicted)

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
        self._base, self._queue_of_job = base, queue_of_job

    def shift(self, allocation: Allocation, sign: int) -> None:
        resources = allocation.resources
        self.total = shifted(self.total, resources, sign)
        _shift(self.by_queue, self._queue_of_job(allocation.job_uid), resources, sign)
        _shift(self.by_job, allocation.job_uid, resources, sign)
        _shift(self.by_node, allocation.node_name, resources, sign)

    def freeze(self) -> Counters:
        return Counters(self.total, self.by_queue, self.by_job, self.by_node, self._base.placed,
                        self._base.evicted)


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


def _view(task_uid: str, allocation: Allocation, queue_of_job: Callable[[str], str | None],
          seq: int) -> AllocationView:
    return AllocationView(task_uid, allocation.job_uid, queue_of_job(allocation.job_uid),
                          allocation.node_name, Resources(allocation.resources), seq, raw_of(allocation))


def count(allocations: Iterable[Allocation], queue_of_job: Callable[[str], str | None]) -> Counters:
    """Counters of ``allocations`` from scratch (tests and checks)."""
    return Counters().apply(((allocation, 1) for allocation in allocations), queue_of_job)
