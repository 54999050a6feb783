"""The ``cluster`` root through real gunicorn (2 workers), on both stores: every worker decides
from the same facts, the shared store's snapshot and counters, net of this cycle's allocations
and evictions; and the research queue's enqueue rule answers from them."""

from __future__ import annotations

import json
from pathlib import Path


from tests.support.bodies import SAMPLES

ROOT = Path(__file__).resolve().parents[2]
POLICIES = {
    "facts.policy": """\
filter facts: false
    reason "idle {cluster.idle.gpu} used {cluster.used.gpu} on {cluster.node_count}; here {sum(n.idle.gpu for n in cluster.nodes if n.name == node.name)}"
""",
    "research-queue.policy": (ROOT / "policies" / "research-queue.policy").read_text(encoding="utf-8"),
}


def test_every_worker_sees_the_cluster_idle_total_drop_and_come_back(server, volcano):
    open_body = (SAMPLES / "onSessionOpen.json").read_bytes()
    snapshot = json.loads(open_body)
    nodes = {n["Name"]: n for n in snapshot["Nodes"].values()}
    job = next(j for j in snapshot["Jobs"].values() if j["Queue"] == "gpu-batch")
    task = min(job["Tasks"].values(), key=lambda t: t["Name"])  # a pending 1-GPU task
    victim = next(t for n in nodes.values() for t in (n["Tasks"] or {}).values()
                  if t["Name"].startswith("run-0001-worker-0"))  # 1 GPU, running on node-0000
    research = {**job, "Queue": "research"}
    volcano.call("onSessionOpen", open_body)

    def facts(node: str) -> set[str]:
        answers = volcano.parallel("predicate", [{"task": task, "node": nodes[node]}] * 32, fresh=True)
        return {a["status"].rsplit(": ", 1)[-1] for a in answers}

    def enqueue() -> set[int]:
        return {a["status"] for a in volcano.parallel("jobEnqueueable", [{"job": research}] * 32, fresh=True)}

    assert facts("node-0004") == {"idle 18 used 2 on 6; here 4"}
    assert enqueue() == {0}  # 18 idle GPUs: the research rule abstains
    volcano.call("allocateFunc", {"task": {**task, "NodeName": "node-0004"}}, fresh=True)
    assert facts("node-0004") == {"idle 17 used 3 on 6; here 3"}
    assert facts("node-0005") == {"idle 17 used 3 on 6; here 7"}
    volcano.call("deallocateFunc", {"task": victim}, fresh=True)  # an eviction gives back
    assert facts("node-0000") == {"idle 18 used 2 on 6; here 8"}
    for name in ("node-0000", "node-0005"):  # 15 more GPUs placed this cycle: 3 left idle
        for i in range(7 if name == "node-0005" else 8):
            placed = {**task, "UID": f"{name}-{i}", "Name": f"filler-{name}-{i}", "NodeName": name}
            volcano.call("allocateFunc", {"task": placed}, fresh=True)
    assert facts("node-0004") == {"idle 3 used 17 on 6; here 3"}
    assert enqueue() == {-1}  # fewer than 4 idle GPUs: research jobs wait
    pids: set = set()
    for _ in range(5):  # on a loaded machine one worker can accept a whole burst
        pids |= {status["pid"] for status in volcano.parallel_get("/status", 64)}
        if len(pids) == 2:
            break
    assert len(pids) == 2, "both workers must have answered for this test to mean anything"
