"""``session.allocations`` and ``session.evictions`` follow the events exactly as the counts do.

Every sequence is played against both real stores and read through the SessionCache a worker
uses, one event at a time; after each event the lists must be what a plain model of the store's
rules (store.py: net per task, a retried deallocate changes nothing, a retried allocate replaces
the record) says: the tasks at net +1 and at net -1, in the order of their last recorded event,
with their last record; the counts must be the lists' sums; and a cache that reads the whole
session at once must agree. A catch-up must leave the buckets no event touched as they were.
"""

from __future__ import annotations

import random

import pytest

from policy_extender.session import SessionCache, decode_allocation, encode_allocation
from policy_extender.session.allocation import AllocationRecord
from policy_extender.schema import INDEXED

from .cluster import JOBS, SOURCES, decode_snapshot, encode_snapshot
from .test_net_events import (ALLOCATE_COMMITTED, ALLOCATE_DISCARDED, EVICT_FAILED_AT_COMMIT, EVICTED_AGAIN,
                              PREEMPT_DISCARDED, PREEMPT_PIPELINED, RECLAIM_COMMITTED, RETRIED, TASKS)

GPU = "nvidia.com/gpu"
NAMED = {"allocate-committed": ALLOCATE_COMMITTED, "allocate-discarded": ALLOCATE_DISCARDED,
         "preempt-pipelined": PREEMPT_PIPELINED, "preempt-discarded": PREEMPT_DISCARDED,
         "reclaim-committed": RECLAIM_COMMITTED, "evict-failed": EVICT_FAILED_AT_COMMIT,
         "retried": RETRIED, "evicted-again": EVICTED_AGAIN}


def _random_plan(seed: int) -> list[tuple[str, str, tuple]]:
    """40 events over 6 tasks; a task's node may change between events (a retried allocate
    elsewhere replaces the record), some tasks have no job or no node."""
    rng = random.Random(seed)
    jobs, nodes = [*JOBS, "", "job-unknown"], ["node-a", "node-b", "node-c", ""]
    return [(rng.choice("+-"), f"t{rng.randrange(6)}",
             (rng.choice(jobs), rng.choice(nodes), float(rng.randrange(3)))) for _ in range(40)]


def _named_plan(events) -> list[tuple[str, str, tuple]]:
    return [(kind, task, TASKS[task]) for kind, task in events]


PLANS = {**{name: _named_plan(events) for name, events in NAMED.items()},
         **{f"random-{seed}": _random_plan(seed) for seed in range(6)}}


class Model:
    """The store's rules, plainly: per task its net, last kind, record and last change's seq."""

    def __init__(self) -> None:
        self.tasks: dict[str, tuple[int, str, tuple, int]] = {}
        self.seq = 0

    def event(self, kind: str, task: str, fields: tuple) -> None:
        net, last, record, seq = self.tasks.get(task, (0, "", (), 0))
        if last == kind == "-":
            return
        if last != kind:
            net += 1 if kind == "+" else -1
        self.seq += 1
        self.tasks[task] = (net, kind, fields, self.seq)

    def listed(self, sign: int) -> list[tuple]:
        entries = sorted((seq, task, fields) for task, (net, _, fields, seq) in self.tasks.items() if net == sign)
        return [(task, job or None, JOBS.get(job), node or None, {GPU: gpus} if gpus else {})
                for _, task, (job, node, gpus) in entries]


def _plain(views) -> list[tuple]:
    return [(v.task, v.job, v.queue, v.node, v.requests.as_dict()) for v in views]


def _lists(counters) -> tuple[list, list]:
    return _plain(counters.placed.items()), _plain(counters.evicted.items())


def _check_counts_are_the_lists(counters) -> None:
    """Every count is the placed tasks' sum minus the evicted ones' (what the counters hold)."""
    by = {"job": counters.by_job, "queue": counters.by_queue, "node": counters.by_node}
    for name, counts in by.items():
        keys = {getattr(v, name) for v in [*counters.placed.items(), *counters.evicted.items()]} - {None}
        assert set(counts) <= keys
        for key in keys:
            placed = counters.placed.bucket(name, key)
            evicted = counters.evicted.bucket(name, key)
            tasks = len(placed) - len(evicted)
            gpus = sum(v.requests.gpu for v in placed) - sum(v.requests.gpu for v in evicted)
            got = counts.get(key)
            assert (got.tasks if got else 0, got.gpu if got else 0) == (tasks, gpus), (name, key)
    assert counters.total.tasks == len(counters.placed) - len(counters.evicted)


@pytest.mark.parametrize("plan", PLANS.values(), ids=PLANS.keys())
def test_the_lists_follow_every_event_like_the_counts(make_store, plan):
    store = make_store()
    session_id = store.open(encode_snapshot(), "v1", SOURCES)
    cache, model = SessionCache(store, decode_snapshot, decode_allocation), Model()
    cache.env()
    for kind, task, (job, node, gpus) in plan:
        before = cache.env().counters
        record = encode_allocation(AllocationRecord(task, job, node, {GPU: gpus} if gpus else {}))
        assert (store.allocate if kind == "+" else store.deallocate)(session_id, task, record)
        model.event(kind, task, (job, node, gpus))
        counters = cache.env().counters
        assert _lists(counters) == (model.listed(1), model.listed(-1)), (kind, task)
        _check_counts_are_the_lists(counters)
        _check_untouched_buckets_are_shared(before, counters, task,
                                            {"job": job or None, "node": node or None, "queue": JOBS.get(job)})
    fresh = SessionCache(store, decode_snapshot, decode_allocation).env().counters  # all at once
    assert _lists(fresh) == _lists(cache.env().counters)


def _check_untouched_buckets_are_shared(before, after, task: str, new_keys: dict) -> None:
    """A catch-up of one event about ``task`` builds new buckets only for the task's old keys (its
    listing in ``before``) and new ones: every other bucket is the very same list."""
    listed = [v for v in [*before.placed.items(), *before.evicted.items()] if v.task == task]
    for old, new in ((before.placed, after.placed), (before.evicted, after.evicted)):
        for name in INDEXED:
            touched = {new_keys[name], *(getattr(v, name) for v in listed)}
            for key in {getattr(v, name) for v in old.items()} - touched:
                assert new.bucket(name, key) is old.bucket(name, key), (name, key)


def test_a_catch_up_over_many_events_gives_the_same_lists(make_store):
    """A worker that was away for a whole random plan applies it in one batch."""
    store = make_store()
    session_id = store.open(encode_snapshot(), "v1", SOURCES)
    behind = SessionCache(store, decode_snapshot, decode_allocation)
    behind.env()
    model = Model()
    for kind, task, (job, node, gpus) in _random_plan(99):
        record = encode_allocation(AllocationRecord(task, job, node, {GPU: gpus} if gpus else {}))
        assert (store.allocate if kind == "+" else store.deallocate)(session_id, task, record)
        model.event(kind, task, (job, node, gpus))
    counters = behind.env().counters
    assert _lists(counters) == (model.listed(1), model.listed(-1))
    _check_counts_are_the_lists(counters)
