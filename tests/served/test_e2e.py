"""End to end: real gunicorn (2 workers), a Volcano-like client, whole scheduling cycles.

Every answer is compared with an expectation worked out here from the bodies and the events
this test sent (not with the service's code): the filters, the scores, the snapshot's
``MinAvailable`` and the per-queue GPUs allocated this cycle. Run once on the SQLite store and
once on a real redis-server.
"""

from __future__ import annotations

import copy
import json
from collections import Counter


from tests.support.bodies import SAMPLES
from tests.support.volcano import VolcanoClient

ZONE = "topology.kubernetes.io/zone"
GPU = "nvidia.com/gpu"
QUEUE_GPU_CAP = 4        # a task fits while its queue's GPUs allocated this cycle + its own <= 4
OVERUSED_AT = 2          # a queue is overused once 2 GPUs were allocated to it this cycle
READY_STATUSES = {2, 8, 16, 32, 128}

POLICIES = {"cycle.policy": f"""\
filter zone: node.labels["{ZONE}"] != "zone-b"
  reason "zone-b is reserved"
filter gang-fits: (task.job.min_available ?? 99) <= 3
  reason "gang too large"
filter gpu-fit: free_gpu >= task_gpu
  reason "not enough idle GPUs"
filter queue-gpu-cap: session.queue.gpu + task_gpu <= {QUEUE_GPU_CAP}
  reason "queue GPU cap this cycle"
score gpu: 10 * free_gpu
enqueue gang-enqueue: job.min_available <= 3
overused gpu-cap: session.queue.gpu >= {OVERUSED_AT}
ready gang-ready: job.ready_tasks + session.job.tasks >= job.min_available
victim low: evictee.priority < evictor.priority
"""}


# ---------------------------------------------------------------------------------------------
# the cluster, from the sample snapshot


class Cluster:
    """The snapshot's objects and this cycle's expected counters (kept by the test itself)."""

    def __init__(self) -> None:
        self.open_body = (SAMPLES / "onSessionOpen.json").read_bytes()
        snapshot = json.loads(self.open_body)
        self.jobs = snapshot["Jobs"]
        self.queues = snapshot["Queues"]
        self.nodes = [clone_node(node, suffix) for node in snapshot["Nodes"].values() for suffix in "abc"]
        self.queue_gpu: dict[str, float] = Counter()  # type: ignore[assignment]  # GPUs come in fractions
        self.job_tasks: Counter = Counter()

    def pending_tasks(self) -> list[dict]:
        tasks = [t for uid in sorted(self.jobs) for t in self.jobs[uid]["Tasks"].values() if t["Status"] == 1]
        return sorted(tasks, key=lambda t: (t["Job"], t["Name"]))

    def running_tasks(self) -> list[dict]:
        return [t for node in self.nodes[::3] for t in (node["Tasks"] or {}).values()]

    def queue_of(self, task: dict) -> str:
        return self.jobs[task["Job"]]["Queue"]

    def fits(self, task: dict, node: dict) -> str:
        """'' when the node fits, else the reason of the first filter that rejects."""
        gpu = task_gpu(task)
        if node["Node"]["metadata"]["labels"][ZONE] == "zone-b":
            return "zone-b is reserved"
        if self.jobs[task["Job"]]["MinAvailable"] > 3:
            return "gang too large"
        if idle_gpu(node) < gpu:
            return "not enough idle GPUs"
        if self.queue_gpu[self.queue_of(task)] + gpu > QUEUE_GPU_CAP:
            return "queue GPU cap this cycle"
        return ""

    def allocate(self, task: dict) -> None:
        self.queue_gpu[self.queue_of(task)] += task_gpu(task)
        self.job_tasks[task["Job"]] += 1

    def deallocate(self, task: dict) -> None:
        self.queue_gpu[self.queue_of(task)] -= task_gpu(task)
        self.job_tasks[task["Job"]] -= 1

    def ready(self, job: dict) -> bool:
        running = sum(t["Status"] in READY_STATUSES for t in job["Tasks"].values())
        return running + self.job_tasks[job["UID"]] >= job["MinAvailable"]


def rejected_for(answer: dict) -> str:
    """The reason text of a predicate answer ("rule (file:line): reason"), '' when it fits."""
    return answer["status"].rsplit(": ", 1)[-1]


def clone_node(node: dict, suffix: str) -> dict:
    clone = copy.deepcopy(node)
    clone["Name"] = f"{node['Name']}-{suffix}"
    return clone


def task_gpu(task: dict) -> float:
    return (task["Resreq"]["ScalarResources"] or {}).get(GPU, 0) / 1000


def idle_gpu(node: dict) -> float:
    return (node["Idle"]["ScalarResources"] or {}).get(GPU, 0) / 1000


# ---------------------------------------------------------------------------------------------
# fixtures: a real server per store, always stopped


# ---------------------------------------------------------------------------------------------
# the cycle


def test_two_whole_cycles_back_to_back(server, volcano):
    for _ in range(2):
        run_cycle(volcano, Cluster())


def run_cycle(volcano: VolcanoClient, cluster: Cluster) -> None:
    volcano.call("onSessionOpen", cluster.open_body)
    check_enqueue(volcano, cluster)
    check_overused(volcano, cluster)
    allocated = [task for task in cluster.pending_tasks() if schedule_task(volcano, cluster, task)]
    assert allocated, "the scenario must allocate something"
    check_overused(volcano, cluster)
    check_ready(volcano, cluster)
    check_victims(volcano, cluster)
    release_and_refit(volcano, cluster, allocated)
    volcano.call("onSessionClose", {})


def check_enqueue(volcano: VolcanoClient, cluster: Cluster) -> None:
    for job in cluster.jobs.values():
        status = volcano.call("jobEnqueueable", {"job": job})["status"]
        assert status == (-1 if job["MinAvailable"] > 3 else 0), (job["Name"], status)
        volcano.call("jobEnqueued", {"job": job})


def check_overused(volcano: VolcanoClient, cluster: Cluster) -> None:
    for queue in cluster.queues.values():
        answer = volcano.call("queueOverused", {"queue": queue})
        assert answer == {"overused": cluster.queue_gpu[queue["Name"]] >= OVERUSED_AT}, queue["Name"]


def schedule_task(volcano: VolcanoClient, cluster: Cluster, task: dict) -> bool:
    """Predicate on every node (16 at once), prioritize the fitting ones, allocate the best."""
    answers = volcano.parallel("predicate", [{"task": task, "node": node} for node in cluster.nodes])
    for node, answer in zip(cluster.nodes, answers):
        reason = cluster.fits(task, node)
        assert rejected_for(answer) == reason, (task["Name"], node["Name"], answer)
        assert (answer["code"] == 0) == (reason == "")
    fitting = [node for node, answer in zip(cluster.nodes, answers) if answer["status"] == ""]
    if not fitting:
        return False
    scores = volcano.call("prioritize", {"task": task, "nodes": fitting})
    assert scores == {"nodeScore": {n["Name"]: 10 * idle_gpu(n) for n in fitting}, "errorMessage": ""}
    best = max(fitting, key=lambda n: (scores["nodeScore"][n["Name"]], n["Name"]))
    placed = {**task, "NodeName": best["Name"]}
    assert volcano.call("allocateFunc", {"task": placed}) == {"errorMessage": ""}
    cluster.allocate(task)
    return True


def check_ready(volcano: VolcanoClient, cluster: Cluster) -> None:
    for job in cluster.jobs.values():
        assert volcano.call("jobReady", {"job": job}) == {"status": cluster.ready(job)}, job["Name"]


def check_victims(volcano: VolcanoClient, cluster: Cluster) -> None:
    evictees = cluster.running_tasks()
    for evictor in cluster.pending_tasks()[:2]:
        lower = [t for t in evictees if t["Priority"] < evictor["Priority"]]
        for verb in ("preemptable", "reclaimable"):
            answer = volcano.call(verb, {"evictor": evictor, "evictees": evictees})
            assert answer["victims"] == lower  # the whole TaskInfo objects we sent
            assert answer["status"] == (1 if lower else 0)


def release_and_refit(volcano: VolcanoClient, cluster: Cluster, allocated: list[dict]) -> None:
    """Deallocating frees the queue's GPUs this cycle: a task refused by the cap fits again."""
    refused = [t for t in cluster.pending_tasks() if t not in allocated and task_gpu(t) > 0]
    assert refused, "the scenario must refuse a task on the queue cap"
    task = refused[0]
    same_queue = [t for t in allocated if cluster.queue_of(t) == cluster.queue_of(task)]
    for released in same_queue:
        assert volcano.call("deallocateFunc", {"task": released}) == {"errorMessage": ""}
        cluster.deallocate(released)
    node = next(n for n in cluster.nodes if cluster.fits(task, n) == "")
    assert volcano.call("predicate", {"task": task, "node": node}) == {"status": "", "code": 0}


# ---------------------------------------------------------------------------------------------
# what a per-process dict would get wrong


def test_every_worker_sees_an_allocation_made_through_another(server, volcano):
    """An allocate lands on one worker; predicates on fresh connections reach both workers, and
    every one of them must count it. A per-process dict answers "fits" from the other worker."""
    cluster = Cluster()
    volcano.call("onSessionOpen", cluster.open_body)
    restricted = [t for t in cluster.pending_tasks() if cluster.queue_of(t) == "restricted"]
    small, big = sorted(restricted, key=task_gpu)[:2]           # 2 GPUs, then 4 GPUs
    node = next(n for n in cluster.nodes if idle_gpu(n) >= task_gpu(big) and cluster.fits(big, n) == "")
    body = {"task": big, "node": node}
    assert volcano.call("predicate", body) == {"status": "", "code": 0}  # 0 + 4 <= 4
    volcano.call("allocateFunc", {"task": {**small, "NodeName": node["Name"]}}, fresh=True)
    answers = volcano.parallel("predicate", [body] * 48, fresh=True)
    assert [rejected_for(a) for a in answers] == ["queue GPU cap this cycle"] * len(answers)
    assert all(a["code"] != 0 for a in answers)
    pids = {status["pid"] for status in volcano.parallel_get("/status", 64)}
    assert len(pids) == 2, "both workers must have answered for this test to mean anything"
    volcano.call("onSessionClose", {})
    assert rejected_for(volcano.call("predicate", body)) == "gang too large"  # no session: no job
