"""``check --scale nodes=N,tasks=M[,allocations=A]``: every rule of a set, alone, on a generated
cluster of that size, through the service's own decode and decide (issue 47 item 4).

The cluster (``generate``) is compact input for ``wire.compact``, deterministic: N nodes in three
pools, zones and racks of 20, 64 CPUs and 8 GPUs each; M running tasks of 8-task jobs in four
queues, spread evenly over the nodes (each task in its node's ``Tasks`` and its job's, as Volcano
sends them); a pending job of 8 one-GPU tasks, the subject of every call; and A tasks of another
job allocated this cycle, one per node in turn. An in-process service (``exchange.Exchanger``,
SQLite session store) opens the session and records the allocations as Volcano's calls would.

Then, after one untimed call of each verb by the whole set (what the session builds once, such as
the ``cluster`` view, is not charged to the first rule that reads it), each rule decides alone
(``PolicySet.alone``) each verb its kind serves, one call each, on the
views the service decodes: predicate on every ``N / PREDICATE_SAMPLE``-th node (the worst call
kept), prioritize over all N nodes, preemptable/reclaimable with the tasks of the first node as
evictees, jobEnqueueable/jobReady on the pending job, queueOverused on its queue. A call runs
under a fresh call budget without a deadline (``lang.budget``): its elements are what the budget
counted, its time the wall time of the decision; a rule that errs (E512 at the budget) says so.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

from policy_extender.decide.table import VERBS, VERBS_OF_RULE_KIND
from policy_extender.errors import EvalError
from policy_extender.lang import budget
from policy_extender.wire import compact

from .exchange import Exchanger

POOLS = ("a100", "h100", "l40s")
QUEUES = ("default", "research", "prod", "dev")
JOB_SIZE = 8
PREDICATE_SAMPLE = 25  # predicate calls timed per rule (nodes spread over the cluster)
GIB = 2**30


@dataclass(frozen=True)
class Scale:
    nodes: int
    tasks: int
    allocations: int

    @classmethod
    def parse(cls, text: str) -> Scale:
        """``nodes=2000,tasks=60000[,allocations=600]``; tasks default to 20 a node, allocations to
        a quarter of the nodes. ValueError with what is wrong."""
        given: dict[str, int] = {}
        for part in filter(None, (p.strip() for p in text.split(","))):
            key, sep, value = part.partition("=")
            if not sep or key not in ("nodes", "tasks", "allocations") or not value.strip().isdigit():
                raise ValueError(f"--scale takes nodes=N,tasks=M[,allocations=A] (whole numbers), not {part!r}")
            given[key] = int(value)
        if given.get("nodes", 0) < 1:
            raise ValueError("--scale needs nodes=N with N >= 1, e.g. --scale nodes=2000,tasks=60000")
        nodes = given["nodes"]
        return cls(nodes, given.get("tasks", 20 * nodes), given.get("allocations", nodes // 4))

    def text(self) -> str:
        per = self.tasks / self.nodes
        return (f"{self.nodes:,} nodes, {self.tasks:,} running tasks ({per:.3g} a node), "
                f"{self.allocations:,} allocations this cycle")


@dataclass
class Measured:
    """One rule on one verb: the worst call's elements and seconds, and its error code if it erred."""

    rule: str
    kind: str
    verb: str
    elements: int
    seconds: float
    error: str = ""


def _node_name(i: int) -> str:
    return f"node-{i:05d}"


def _running_task(g: int, node: int) -> dict:
    return {"name": f"run-{g // JOB_SIZE}-{g % JOB_SIZE}", "namespace": f"team-{g % 3}", "node": _node_name(node),
            "labels": {"app": f"app-{(g // JOB_SIZE) % 10}"}, "priority": g % 5,
            "requests": {"cpu": 2, "memory": 8 * GIB, "nvidia.com/gpu": 1 if g % 4 == 0 else 0}}


def generate(scale: Scale) -> dict[str, Any]:
    """The generated cluster's compact input: ``nodes``, ``jobs``, ``queues``, the pending
    ``subject`` job (its first task asks the task-scoped verbs), and ``allocations``."""
    n = scale.nodes
    placed = [divmod(g, n)[1] for g in range(scale.tasks)]  # task g runs on node g % N
    on_node: list[list[dict]] = [[] for _ in range(n)]
    jobs: dict[int, dict] = {}
    for g, node in enumerate(placed):
        task = _running_task(g, node)
        on_node[node].append(task)
        job = jobs.setdefault(g // JOB_SIZE, {"name": f"run-{g // JOB_SIZE}", "namespace": f"team-{g % 3}",
                                              "queue": QUEUES[(g // JOB_SIZE) % len(QUEUES)], "tasks": []})
        job["tasks"].append({k: task[k] for k in ("node", "labels", "priority", "requests")})
        job["namespace"] = task["namespace"] if len(job["tasks"]) == 1 else job["namespace"]
    nodes = [{"name": _node_name(i),
              "labels": {"pool": POOLS[i % 3], "topology.kubernetes.io/zone": f"zone-{i % 3}", "rack": f"rack-{i // 20}"},
              "allocatable": {"cpu": 64, "memory": 512 * GIB, "nvidia.com/gpu": 8},
              "tasks": on_node[i]} for i in range(n)]
    request = {"cpu": 4, "memory": 16 * GIB, "nvidia.com/gpu": 1}
    subject = {"name": "scale-subject", "namespace": "ml", "queue": "research", "min_available": JOB_SIZE,
               "tasks": [{"requests": request, "labels": {"app": "app-0"}} for _ in range(JOB_SIZE)]}
    placing = {"name": "scale-placing", "namespace": "ml", "queue": "prod", "min_available": 1,
               "tasks": [{"requests": request} for _ in range(scale.allocations)]}
    allocations = [{"name": f"scale-placing-{i}", "namespace": "ml", "job": "ml/scale-placing", "node": _node_name(i % n),
                    "requests": request} for i in range(scale.allocations)]
    queues = [{"name": q, "weight": 1, "deserved": {"nvidia.com/gpu": 8 * n // len(QUEUES)}} for q in QUEUES]
    return {"nodes": nodes, "jobs": [*jobs.values(), subject, placing], "queues": queues, "subject": subject,
            "allocations": allocations}


def _body(value) -> bytes:
    return json.dumps(value).encode()


class Bench:
    """The generated cluster opened in an in-process service for ``policy_set``; each rule measured alone."""

    def __init__(self, policy_set, scale: Scale) -> None:
        self.policy_set, self.scale = policy_set, scale
        cluster = generate(scale)
        started = time.perf_counter()
        self.exchanger = Exchanger(policy_set)
        self.exchanger.open_session(_body(compact.session_body(cluster["jobs"], cluster["queues"], cluster["nodes"])),
                                    [_body(compact.allocate_body(a)) for a in cluster["allocations"]])
        self.open_seconds = time.perf_counter() - started
        self.env = self.exchanger.service.session_cache.env()
        task = {"name": "scale-subject-0", "namespace": "ml", "job": "ml/scale-subject",
                "requests": cluster["subject"]["tasks"][0]["requests"], "labels": {"app": "app-0"}}
        step = max(1, scale.nodes // PREDICATE_SAMPLE)
        self.bodies: dict[str, list[bytes]] = {
            "predicate": [_body(compact.predicate_body(task, cluster["nodes"][i])) for i in range(0, scale.nodes, step)],
            "prioritize": [_body(compact.prioritize_body(task, cluster["nodes"]))],
            "preemptable": [_body(compact.victims_body(task, cluster["nodes"][0]["tasks"] or [{"name": "none"}]))],
            "jobEnqueueable": [_body(compact.job_body(cluster["subject"]))],
            "jobReady": [_body(compact.job_body(cluster["subject"]))],
            "queueOverused": [_body(compact.queue_body({"name": "research"}))],
        }
        self.bodies["reclaimable"] = self.bodies["preemptable"]
        self.requests: dict[str, list] = {}

    def decoded(self, verb: str) -> list:
        if verb not in self.requests:
            entry = VERBS[verb]
            self.requests[verb] = [entry.decode(b, self.policy_set.reads, self.env) for b in self.bodies[verb]]
        return self.requests[verb]

    def measure(self) -> list[Measured]:
        """Every rule on every verb its kind decides, worst call first. Each verb is decided once by
        the whole set first, not timed: what the session builds once and keeps for every call
        (the ``cluster`` view, say) is not charged to whichever rule happens to read it first."""
        for verb in sorted({v for rule in self.policy_set.rules for v in VERBS_OF_RULE_KIND[rule.kind]}):
            for request in self.decoded(verb)[:1]:
                previous = budget.begin()
                try:
                    VERBS[verb].decide(self.policy_set, request, self.env)  # type: ignore[misc]  # a deciding verb
                except EvalError:
                    pass
                finally:
                    budget.end(previous)
        found = []
        for rule in self.policy_set.rules:
            alone = self.policy_set.alone(rule.name)
            for verb in VERBS_OF_RULE_KIND[rule.kind]:
                found.append(self.one(alone, rule, verb))
        return sorted(found, key=lambda m: (-m.elements, -m.seconds))

    def one(self, alone, rule, verb: str) -> Measured:
        entry = VERBS[verb]
        worst = Measured(rule.name, rule.kind, verb, 0, 0.0)
        for request in self.decoded(verb):
            previous = budget.begin()
            error = ""
            started = time.perf_counter()
            try:
                entry.decide(alone, request, self.env)  # type: ignore[misc]  # a deciding verb
            except EvalError as err:
                error = err.code
            seconds = time.perf_counter() - started
            spent = budget.current().spent
            budget.end(previous)
            if (spent, seconds) > (worst.elements, worst.seconds) or error:
                worst = Measured(rule.name, rule.kind, verb, spent, seconds, error or worst.error)
        return worst

    def close(self) -> None:
        self.exchanger.close_session()
