"""Test helpers: a small real snapshot codec, and a scheduling cycle played by several processes.

The snapshot here is a msgpack map {job uid: queue name}; the wire layer's real snapshot offers
the same two lookups (``job(uid)`` with a ``queue_name``, ``queue(name)``), and its cluster-wide
facts (``cluster_facts()``: none here).
"""

from __future__ import annotations

import multiprocessing
import os
import threading
import traceback
from dataclasses import dataclass

import msgspec

from policy_extender.session.allocation import AllocationRecord, encode_allocation
from policy_extender.wire.cluster import ClusterFacts

JOBS = {f"job-{n}": f"queue-{n % 2}" for n in range(4)}
SOURCES = {"gpu.policy": "score 10 * free_gpu\n"}


@dataclass(frozen=True)
class JobStub:
    uid: str
    queue_name: str


@dataclass(frozen=True)
class QueueStub:
    name: str


class DictSnapshot:
    def __init__(self, jobs: dict[str, str]) -> None:
        self.jobs = jobs

    def job(self, uid: str) -> JobStub | None:
        return JobStub(uid, self.jobs[uid]) if uid in self.jobs else None

    def queue(self, name: str) -> QueueStub | None:
        return QueueStub(name) if name in self.jobs.values() else None

    def cluster_facts(self) -> ClusterFacts:
        return ClusterFacts((), {}, ())


def encode_snapshot(jobs: dict[str, str] = JOBS) -> bytes:
    return msgspec.msgpack.encode(jobs)


def decode_snapshot(data: bytes) -> DictSnapshot:
    return DictSnapshot(msgspec.msgpack.decode(data))


# -- one cycle's events, sent by many threads of many processes ---------------------------------

@dataclass(frozen=True)
class Plan:
    processes: int = 3
    threads: int = 4
    tasks: int = 40  # per thread


def record(task_uid: str, n: int, node: str) -> AllocationRecord:
    return AllocationRecord(task_uid, f"job-{n % 4}", node, {"nvidia.com/gpu": 1.0, "cpu": 0.5})


def thread_events(store, session_id: str, process: int, thread: int, plan: Plan) -> None:
    """Allocate every task twice (a retry), deallocate every third twice; and every thread
    allocates the same shared tasks, which must count once each."""
    node = f"node-{process}"
    for n in range(plan.tasks):
        uid = f"p{process}-t{thread}-{n}"
        encoded = encode_allocation(record(uid, n, node))
        store.allocate(session_id, uid, encoded)
        store.allocate(session_id, uid, encoded)
        store.allocate(session_id, f"shared-{n}", encode_allocation(record(f"shared-{n}", n, "node-s")))
        if n % 3 == 0:
            store.deallocate(session_id, uid, encoded)
            store.deallocate(session_id, uid, encoded)


def expected_records(plan: Plan) -> list[AllocationRecord]:
    kept = [record(f"p{p}-t{t}-{n}", n, f"node-{p}")
            for p in range(plan.processes) for t in range(plan.threads)
            for n in range(plan.tasks) if n % 3 != 0]
    return kept + [record(f"shared-{n}", n, "node-s") for n in range(plan.tasks)]


def worker_process(store, process: int, plan: Plan, results) -> None:
    """Child process: report the session it sees, then send its threads' events."""
    try:
        head = store.head()
        seen = None if head is None else (
            head.session_id, head.policy_version, store.snapshot(head.session_id),
            store.policy_sources(head.policy_version))
        if head is not None:
            _send_from_threads(store, head.session_id, process, plan)
        results.put((process, os.getpid(), seen, None))
    except BaseException:  # report, do not hang the parent
        results.put((process, os.getpid(), None, traceback.format_exc()))


def _send_from_threads(store, session_id: str, process: int, plan: Plan) -> None:
    threads = [threading.Thread(target=thread_events, args=(store, session_id, process, t, plan))
               for t in range(plan.threads)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def run_processes(store, start_method: str, plan: Plan) -> list[tuple]:
    """Run ``plan.processes`` child processes on ``store``; their reports, ordered by index."""
    context = multiprocessing.get_context(start_method)
    results = context.Queue()
    children = [context.Process(target=worker_process, args=(store, p, plan, results))  # type: ignore[attr-defined]  # a start method's context
                for p in range(plan.processes)]
    for child in children:
        child.start()
    reports = sorted(results.get(timeout=120) for _ in children)
    for child in children:
        child.join(timeout=30)
    return reports
