"""Two ``policy-extender serve`` instances on one host, each driven through whole scheduling
cycles at the same time, every answer checked against what that instance's own snapshot and
allocations make right.

Method: both instances run with the defaults a user gets (no ``--session-store``, no
``PROMETHEUS_MULTIPROC_DIR``), 2 gunicorn workers each, the cycle policies of
``tests/served/test_e2e.py`` (rules reading ``task.job``, ``session.queue``, ``session.job``).
Instance A gets the sample snapshot, instance B the same jobs (same UIDs, as two schedulers of
one cluster see them) with other ``MinAvailable`` values and queues. A cycle is onSessionOpen,
jobEnqueueable/jobEnqueued per job, queueOverused per queue, then for each pending task the
predicate on 18 nodes (16 in parallel, Volcano's predicate workers), prioritize on the nodes that
fit and allocateFunc on the best, queueOverused and jobReady again, preemptable/reclaimable,
deallocateFunc of a queue's allocations and a predicate that must fit again, onSessionClose.
The expected answers are worked out by the test from the bodies it sent (``Cluster``); an answer
that differs, or a non-200, counts as wrong.

    python -m tests.ops.instances --cycles 20      # prints the counts of each instance
"""

from __future__ import annotations

import argparse
import json
import tempfile
import threading
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.policies import write_policies
from tests.served.test_e2e import OVERUSED_AT, POLICIES, Cluster, idle_gpu, rejected_for, task_gpu
from tests.support.volcano import Server, VolcanoClient

#: Instance B's snapshot: job name prefix -> (MinAvailable, queue). Each change flips answers.
VARIANT = {
    "job-000": (5, "default"),       # gang too large in B, fits in A
    "job-001": (2, "restricted"),    # its GPUs count against B's restricted queue, not gpu-batch
    "job-002": (4, "restricted"),    # gang too large in B, fits in A (when GPUs allow)
    "run-0003": (1, "default"),      # ready in B, not in A
}


def cluster(variant: bool) -> Cluster:
    """A's cluster (the sample snapshot) or B's (the same jobs, changed by ``VARIANT``)."""
    result = Cluster()
    if not variant:
        return result
    snapshot = json.loads(result.open_body)
    for job in snapshot["Jobs"].values():
        for prefix, (min_available, queue) in VARIANT.items():
            if job["Name"].startswith(prefix):
                job["MinAvailable"], job["Queue"] = min_available, queue
    result.open_body = json.dumps(snapshot).encode()
    result.jobs, result.queues = snapshot["Jobs"], snapshot["Queues"]
    return result


@dataclass
class Tally:
    """Calls by verb and every wrong answer (verb, what, got, expected)."""

    calls: Counter = field(default_factory=Counter)
    wrong: list = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def check(self, verb: str, what: str, got, expected) -> None:
        with self.lock:
            self.calls[verb] += 1
            if got != expected:
                self.wrong.append((verb, what, got, expected))

    def figures(self) -> dict:
        return {"calls": sum(self.calls.values()), "wrong": len(self.wrong),
                "by_verb": dict(sorted(self.calls.items()))}


def answer(client: VolcanoClient, verb: str, body) -> object:
    """The decoded answer, or the failure as text (a non-200, a dropped connection): counted wrong."""
    try:
        return client.call(verb, body)
    except AssertionError as exc:
        return f"non-200: {exc}"[:200]
    except OSError as exc:
        return f"failed: {exc!r}"


def run_cycle(client: VolcanoClient, cl: Cluster, tally: Tally) -> None:
    tally.check("onSessionOpen", "open", answer(client, "onSessionOpen", cl.open_body), {})
    for job in cl.jobs.values():
        got = answer(client, "jobEnqueueable", {"job": job})
        tally.check("jobEnqueueable", job["Name"], got.get("status") if isinstance(got, dict) else got,
                    -1 if job["MinAvailable"] > 3 else 0)
        tally.check("jobEnqueued", job["Name"], answer(client, "jobEnqueued", {"job": job}), {})
    check_overused(client, cl, tally)
    allocated = [task for task in cl.pending_tasks() if schedule(client, cl, task, tally)]
    check_overused(client, cl, tally)
    for job in cl.jobs.values():
        tally.check("jobReady", job["Name"], answer(client, "jobReady", {"job": job}), {"status": cl.ready(job)})
    check_victims(client, cl, tally)
    release_and_refit(client, cl, allocated, tally)
    tally.check("onSessionClose", "close", answer(client, "onSessionClose", {}), {})


def check_overused(client: VolcanoClient, cl: Cluster, tally: Tally) -> None:
    for queue in cl.queues.values():
        tally.check("queueOverused", queue["Name"], answer(client, "queueOverused", {"queue": queue}),
                    {"overused": cl.queue_gpu[queue["Name"]] >= OVERUSED_AT})


def schedule(client: VolcanoClient, cl: Cluster, task: dict, tally: Tally) -> bool:
    """Predicates on every node (16 at once), prioritize the nodes that must fit, allocate the best."""
    bodies = [{"task": task, "node": node} for node in cl.nodes]
    answers = client.parallel_map(lambda body: answer(client, "predicate", body), bodies)
    for node, got in zip(cl.nodes, answers):
        reason = rejected_for(got) if isinstance(got, dict) else got
        tally.check("predicate", f"{task['Name']} on {node['Name']}", reason, cl.fits(task, node))
    fitting = [node for node in cl.nodes if cl.fits(task, node) == ""]
    if not fitting:
        return False
    scores = answer(client, "prioritize", {"task": task, "nodes": fitting})
    expected = {n["Name"]: 10 * idle_gpu(n) for n in fitting}
    tally.check("prioritize", task["Name"], scores, {"nodeScore": expected, "errorMessage": ""})
    best = max(fitting, key=lambda n: (expected[n["Name"]], n["Name"]))
    placed = {**task, "NodeName": best["Name"]}
    tally.check("allocateFunc", task["Name"], answer(client, "allocateFunc", {"task": placed}), {"errorMessage": ""})
    cl.allocate(task)
    return True


def check_victims(client: VolcanoClient, cl: Cluster, tally: Tally) -> None:
    evictees = cl.running_tasks()
    for evictor in cl.pending_tasks()[:2]:
        lower = [t for t in evictees if t["Priority"] < evictor["Priority"]]
        for verb in ("preemptable", "reclaimable"):
            got = answer(client, verb, {"evictor": evictor, "evictees": evictees})
            tally.check(verb, evictor["Name"], got.get("victims") if isinstance(got, dict) else got, lower)


def release_and_refit(client: VolcanoClient, cl: Cluster, allocated: list, tally: Tally) -> None:
    """Deallocate every allocated GPU task of one queue; a task of that queue must then fit."""
    refused = [t for t in cl.pending_tasks() if t not in allocated and task_gpu(t) > 0
               and cl.queue_gpu[cl.queue_of(t)] > 0]
    if not refused:
        return
    task = refused[0]
    for released in [t for t in allocated if cl.queue_of(t) == cl.queue_of(task)]:
        tally.check("deallocateFunc", released["Name"], answer(client, "deallocateFunc", {"task": released}),
                    {"errorMessage": ""})
        cl.deallocate(released)
    for node in cl.nodes[:3]:
        got = answer(client, "predicate", {"task": task, "node": node})
        tally.check("predicate", f"refit {task['Name']} on {node['Name']}",
                    rejected_for(got) if isinstance(got, dict) else got, cl.fits(task, node))


def drive(server: Server, variant: bool, cycles: int, tally: Tally, started: threading.Barrier | None = None) -> None:
    """``cycles`` whole cycles on ``server``, each on a fresh ``Cluster`` (A's or B's)."""
    client = VolcanoClient(server.port, workers=16)
    try:
        if started is not None:
            started.wait(timeout=60)
        for _ in range(cycles):
            run_cycle(client, cluster(variant), tally)
    finally:
        client.close()


def run_concurrently(servers: tuple[Server, Server], cycles: int) -> tuple[Tally, Tally]:
    """A's cycles and B's cycles at the same time, each on its own instance."""
    tallies = (Tally(), Tally())
    barrier = threading.Barrier(2)
    threads = [threading.Thread(target=drive, args=(server, variant, cycles, tally, barrier))
               for server, variant, tally in zip(servers, (False, True), tallies)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return tallies


def start_two(state_dir: Path, **options) -> tuple[Server, Server]:
    policy_dir = write_policies(state_dir / "policies", POLICIES)
    servers = []
    for name in ("a", "b"):
        (state_dir / name).mkdir(exist_ok=True)
        servers.append(Server(state_dir / name, policy_dir, workers=2, instance_defaults=True, **options))
    for server in servers:
        server.wait_ready()
    return servers[0], servers[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cycles", type=int, default=20)
    args = parser.parse_args()
    print(__doc__.split("\n\n")[1])
    with tempfile.TemporaryDirectory() as tmp:
        servers = start_two(Path(tmp))
        try:
            tallies = run_concurrently(servers, args.cycles)
        finally:
            for server in servers:
                server.stop()
    for name, tally in zip("AB", tallies):
        figures = tally.figures()
        print(f"instance {name}: {args.cycles} cycles, {figures['calls']} calls, {figures['wrong']} wrong answers")
        print(f"  by verb: {figures['by_verb']}")
        for wrong in tally.wrong[:5]:
            print(f"  wrong: {wrong}")


if __name__ == "__main__":
    main()
