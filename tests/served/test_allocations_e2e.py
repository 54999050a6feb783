"""session.allocations and session.evictions through real gunicorn (2 workers), on both stores.

Events land on one worker; predicates and prioritizes on fresh connections reach both, and every
answer must agree with what this test worked out from the events it sent: a spread rule over
this cycle's allocations of the task's job on the node, and a score of the GPUs this cycle's
evictions freed on the node.
"""

from __future__ import annotations

import json


from tests.support.bodies import SAMPLES

POLICIES = {"spread.policy": """\
filter spread: count(a for a in session.allocations if a.job == task.job_id and a.node == node.name and a.requests.gpu > 0) < 1
  reason "a GPU task of this job is already on the node"
score freed: sum(a.requests.gpu for a in session.evictions if a.node == node.name) + 100 * count(session.allocations)
"""}


def test_every_worker_counts_allocations_and_evictions_by_job_and_node(server, volcano):
    open_body = (SAMPLES / "onSessionOpen.json").read_bytes()
    snapshot = json.loads(open_body)
    nodes = {name: node for name, node in ((n["Name"], n) for n in snapshot["Nodes"].values())}
    job = next(j for j in snapshot["Jobs"].values() if j["Queue"] == "gpu-batch")
    first, second = sorted(job["Tasks"].values(), key=lambda t: t["Name"])  # two pending 1-GPU tasks
    victim = next(t for n in nodes.values() for t in (n["Tasks"] or {}).values()
                  if t["Name"].startswith("run-0001-worker-0"))           # 1 GPU, running on node-0000
    here, there = nodes["node-0004"], nodes["node-0005"]
    volcano.call("onSessionOpen", open_body)

    def predicates(task, node) -> set[str]:
        answers = volcano.parallel("predicate", [{"task": task, "node": node}] * 32, fresh=True)
        return {a["status"].rsplit(": ", 1)[-1] for a in answers}

    def scores() -> set[tuple]:
        body = {"task": second, "nodes": list(nodes.values())}
        answers = volcano.parallel("prioritize", [body] * 32, fresh=True)
        return {tuple(sorted(a["nodeScore"].items())) for a in answers}

    assert predicates(second, here) == {""}
    volcano.call("allocateFunc", {"task": {**first, "NodeName": here["Name"]}}, fresh=True)
    assert predicates(second, here) == {"a GPU task of this job is already on the node"}
    assert predicates(second, there) == {""}
    volcano.call("deallocateFunc", {"task": {**first, "NodeName": here["Name"]}}, fresh=True)  # Discard
    assert predicates(second, here) == {""}

    volcano.call("allocateFunc", {"task": {**first, "NodeName": there["Name"]}}, fresh=True)
    volcano.call("deallocateFunc", {"task": victim}, fresh=True)  # an eviction: net -1, not an allocation
    expected = {name: 100.0 * 1 + (1 if name == victim["NodeName"] else 0) for name in nodes}
    assert scores() == {tuple(sorted(expected.items()))}
    assert predicates(second, there) == {"a GPU task of this job is already on the node"}
    pids: set = set()
    for _ in range(5):  # on a loaded machine one worker can accept a whole burst
        pids |= {status["pid"] for status in volcano.parallel_get("/status", 64)}
        if len(pids) == 2:
            break
    assert len(pids) == 2, "both workers must have answered for this test to mean anything"
