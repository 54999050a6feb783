"""This cycle's counts are the net change of the cycle, whatever order Volcano's events come in.

The event sequences are those of Volcano's ``framework/statement.go``: ``Allocate`` and
``Pipeline`` fire AllocateFunc, ``Evict`` fires DeallocateFunc for a task that was running before
the cycle; ``Discard`` undoes the operations in reverse order (``unallocate`` and ``unpipeline``
fire DeallocateFunc, ``unevict`` fires AllocateFunc); ``Commit`` fires nothing unless an operation
fails (a failed evict is unevicted, a failed allocate unallocated). Each is played against both
stores and read through the SessionCache a worker uses.
"""

from __future__ import annotations

import pytest

from policy_extender.session import SessionCache, decode_allocation, encode_allocation
from policy_extender.session.allocation import AllocationRecord

from .cluster import SOURCES, decode_snapshot, encode_snapshot

GPU = "nvidia.com/gpu"
#: task -> (job, node, GPUs); "victim" ran on node-a before the cycle
TASKS = {"t1": ("job-0", "node-a", 1.0), "t2": ("job-0", "node-b", 2.0),
         "preemptor": ("job-1", "node-a", 4.0), "victim": ("job-2", "node-a", 3.0)}


def record(task: str) -> bytes:
    job, node, gpus = TASKS[task]
    return encode_allocation(AllocationRecord(task, job, node, {GPU: gpus}))


def play(store, events: list[tuple[str, str]]):
    """Open a session, send ``events`` (("+", task) allocate, ("-", task) deallocate), and return
    what a worker's cache counts."""
    session_id = store.open(encode_snapshot(), "v1", SOURCES)
    cache = SessionCache(store, decode_snapshot, decode_allocation)
    cache.env()  # a worker that read the session before the events: it catches up event by event
    for kind, task in events:
        send = store.allocate if kind == "+" else store.deallocate
        assert send(session_id, task, record(task))
        cache.env()
    counters = cache.env().counters
    fresh = SessionCache(store, decode_snapshot, decode_allocation).env().counters  # one that reads all at once
    assert _plain(fresh) == _plain(counters)
    return counters


def _plain(counters):
    def flat(by):
        return {key: (counts.tasks, counts.as_dict()) for key, counts in by.items()}
    return ((counters.total.tasks, counters.total.as_dict()), flat(counters.by_queue),
            flat(counters.by_job), flat(counters.by_node))


ALLOCATE_COMMITTED = [("+", "t1"), ("+", "t2")]
ALLOCATE_DISCARDED = [("+", "t1"), ("+", "t2"), ("-", "t2"), ("-", "t1")]  # Discard: reverse order
PREEMPT_PIPELINED = [("-", "victim"), ("+", "preemptor")]  # Evict, then Pipeline; Commit adds none
PREEMPT_DISCARDED = PREEMPT_PIPELINED + [("-", "preemptor"), ("+", "victim")]  # unpipeline, unevict
RECLAIM_COMMITTED = [("-", "victim")]  # Evict; Commit
EVICT_FAILED_AT_COMMIT = [("-", "victim"), ("+", "victim")]  # evict() fails: unevict
RETRIED = [("+", "t1"), ("+", "t1"), ("-", "victim"), ("-", "victim")]
EVICTED_AGAIN = [("-", "victim"), ("+", "victim"), ("-", "victim")]  # a later statement evicts it


def test_allocations_committed_count_once_each(make_store):
    counters = play(make_store(), ALLOCATE_COMMITTED)
    assert (counters.total.tasks, counters.total.gpu) == (2, 3)
    assert counters.by_node["node-a"].tasks == 1 and counters.by_job["job-0"].gpu == 3


@pytest.mark.parametrize("events", [ALLOCATE_DISCARDED, PREEMPT_DISCARDED, EVICT_FAILED_AT_COMMIT],
                         ids=["allocate-discarded", "preempt-discarded", "evict-failed"])
def test_undone_operations_net_to_nothing(make_store, events):
    counters = play(make_store(), events)
    assert (counters.total.tasks, counters.total.gpu) == (0, 0)
    assert counters.by_node == {} and counters.by_job == {} and counters.by_queue == {}


def test_an_eviction_alone_lowers_the_victims_node_job_and_queue(make_store):
    counters = play(make_store(), RECLAIM_COMMITTED)
    assert (counters.by_node["node-a"].tasks, counters.by_node["node-a"].gpu) == (-1, -3)
    assert counters.by_job["job-2"].tasks == -1
    assert counters.by_queue["queue-0"].gpu == -3  # job-2 is in queue-0 (cluster.JOBS)
    assert (counters.total.tasks, counters.total.gpu) == (-1, -3)


def test_a_committed_preemption_swaps_the_victim_for_the_preemptor(make_store):
    counters = play(make_store(), PREEMPT_PIPELINED)
    node = counters.by_node["node-a"]
    assert (node.tasks, node.gpu) == (0, 1)  # one task out (3 GPUs), one in (4 GPUs)
    assert counters.by_job["job-1"].tasks == 1 and counters.by_job["job-2"].tasks == -1


def test_retried_events_count_once(make_store):
    counters = play(make_store(), RETRIED)
    assert counters.by_node["node-a"].tasks == 0  # t1 in, victim out
    assert (counters.by_job["job-0"].tasks, counters.by_job["job-2"].tasks) == (1, -1)


def test_a_victim_evicted_again_after_an_unevict_counts_minus_one(make_store):
    counters = play(make_store(), EVICTED_AGAIN)
    assert counters.by_node["node-a"].tasks == -1
