"""Real wire views to evaluate fuzzed policies on: the shared sample bodies decoded through
``policy_extender.wire`` with the policy set's own read set, in and out of a session."""

from __future__ import annotations

import json
from pathlib import Path

from policy_extender.wire import decode
from policy_extender.wire.session_views import NO_SESSION, PlacedTask, SnapshotEnv

#: the test suite's copy of the shared sample bodies (tests/samples)
SAMPLES = Path(__file__).resolve().parents[1] / "samples"


def sample(verb: str) -> bytes:
    return (SAMPLES / f"{verb}.json").read_bytes()


def snapshot_env(reads) -> SnapshotEnv:
    """The sample snapshot's jobs and queues as an open session with one allocation."""
    snapshot = json.loads(sample("onSessionOpen"))
    jobs = {uid: decode.decode_job(json.dumps({"job": j}).encode(), reads).job
            for uid, j in snapshot["Jobs"].items()}
    queues = {q["Name"]: decode.decode_queue(json.dumps({"queue": q}).encode(), reads).queue
              for q in snapshot["Queues"].values()}
    job = next(iter(snapshot["Jobs"].values()))
    allocations = [PlacedTask("t-x", job["UID"], job["Queue"], "node-0", {"nvidia.com/gpu": 1, "cpu": 2})]
    return SnapshotEnv(jobs, queues, allocations)


def evaluate_everything(policy_set, env) -> None:
    """Every decision of ``policy_set`` on the sample bodies; raises what evaluation raises."""
    reads = policy_set.reads
    p = decode.decode_predicate(sample("predicate"), reads, env)
    policy_set.predicate(p.task, p.node, env)
    s = decode.decode_prioritize(sample("prioritize"), reads, env)
    policy_set.prioritize(s.task, s.nodes, env)
    for kind in ("preemptable", "reclaimable"):
        v = decode.decode_victims(sample(kind), reads, env)
        policy_set.victims(kind, v.evictor, v.evictees, env)
    policy_set.enqueueable(decode.decode_job(sample("jobEnqueueable"), reads, env).job, env)
    policy_set.ready(decode.decode_job(sample("jobReady"), reads, env).job, env)
    policy_set.overused(decode.decode_queue(sample("queueOverused"), reads, env).queue, env)


def evaluate_in_and_out_of_session(policy_set) -> None:
    evaluate_everything(policy_set, NO_SESSION)
    evaluate_everything(policy_set, snapshot_env(policy_set.reads))
