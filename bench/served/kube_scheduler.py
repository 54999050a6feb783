"""kube-scheduler's extender bodies, real-shaped, and the benchmark of its verbs on a served ``serve``.

Bodies (:class:`KubeBodies`) are what kube-scheduler's ``HTTPExtender`` (pkg/scheduler/extender.go)
sends with ``nodeCacheCapable: false``, encoded as Go's ``encoding/json`` does (wrapper keys are Go
field names, no json tags; the objects inside are v1 JSON):

- filter and prioritize: ``ExtenderArgs{"Pod", "Nodes": {"metadata": {}, "items": [...]}, "NodeNames": null}``;
- preempt: ``ExtenderPreemptionArgs{"Pod", "NodeNameToVictims": {node: {"Pods": [...],
  "NumPDBViolations": n}}, "NodeNameToMetaVictims": null}``.

The nodes are the benchmark cluster's v1.Nodes (``bench.generate.Cluster.k8s_node``: labels,
annotations, taints on GPU nodes, status with capacity, allocatable, conditions, addresses,
nodeInfo and 13 images, and ``managedFields``, which kube-scheduler's node informer keeps: about
7 KB each). Pods come from its informer with ``managedFields``
dropped (``newPodInformer``'s transform), so they are sent without them. Tests reuse these
builders (tests/wire, tests/web); ``samples/kube-scheduler/`` holds one body of each verb
written by :func:`write_samples`.

``python -m bench kube-filter-100 kube-filter-1000 kube-prioritize-100 kube-prioritize-1000``
measures the verbs on a real gunicorn ``policy-extender serve`` (the service's own settings,
``bench/kube-policies``) over loopback, one call at a time on a keep-alive connection: kube-scheduler
schedules one pod at a time and calls its extenders in sequence, so that is its load. The bare
WSGI floor (``bench.bare_wsgi``: reads the body, answers ``{}``) is measured on the same calls,
runs interleaved. Each figure is the median over ``--runs`` runs of ``--seconds`` each.
"""

from __future__ import annotations

import copy
import functools
import json
import statistics
from pathlib import Path
from typing import Callable

import orjson

from bench.generate import Cluster, ClusterSpec

KUBE_POLICY_DIR = Path(__file__).resolve().parents[1] / "kube-policies"
SAMPLES = Path(__file__).resolve().parents[2] / "samples" / "kube-scheduler"
#: the default paths (config.kube_scheduler_prefix "/kube-scheduler/")
FILTER_PATH, PRIORITIZE_PATH, PREEMPT_PATH = "/kube-scheduler/filter", "/kube-scheduler/prioritize", "/kube-scheduler/preempt"


class KubeBodies:
    """Bodies over the first ``nodes`` nodes of a benchmark cluster (deterministic per ``seed``)."""

    def __init__(self, nodes: int, pods_per_node: int = 20, seed: int = 1):
        self.cluster = Cluster(ClusterSpec(nodes=nodes, pods_per_node=pods_per_node, seed=seed))
        self.nodes = nodes

    @functools.lru_cache(maxsize=None)
    def node(self, i: int) -> dict:
        """The v1.Node ``i`` as kube-scheduler's node informer holds it (do not modify it)."""
        return self.cluster.k8s_node(i)

    def cordoned(self, i: int) -> dict:
        """Node ``i`` after ``kubectl cordon``: ``spec.unschedulable`` and the taint the node
        lifecycle controller adds (kube-scheduler's own filters keep such a node from extenders;
        tests send it to see the policy's answer)."""
        node = copy.deepcopy(self.node(i))
        node["spec"]["unschedulable"] = True
        node["spec"].setdefault("taints", []).append(
            {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule", "timeAdded": "2025-06-01T00:00:00Z"})
        return node

    def node_name(self, i: int) -> str:
        return self.cluster.node_names[i]

    def pod(self, p: int = 0) -> dict:
        """The pending pod kube-scheduler asks about: pending job ``p``'s first task's pod, as
        the default scheduler's (even ``p``: it names a zone in an annotation; the benchmark
        cluster's pending pods ask for GPUs and tolerate the GPU taint)."""
        pod = _without_managed_fields(self.cluster.pending_task(p, 0)["Pod"])
        pod["spec"]["schedulerName"] = "default-scheduler"
        pod["status"] = {"phase": "Pending", "conditions": [
            {"type": "PodScheduled", "status": "False", "lastProbeTime": None,
             "lastTransitionTime": pod["metadata"]["creationTimestamp"], "reason": "Unschedulable",
             "message": "0/3 nodes are available: 3 Insufficient nvidia.com/gpu."}], "qosClass": "Burstable"}
        return pod

    def victims(self, i: int, count: int) -> list[dict]:
        """``count`` pods running on node ``i`` (kube-scheduler's candidates to evict there)."""
        return [_without_managed_fields(self.cluster.pod_task(i, s)["Pod"]) for s in range(count)]

    def args(self, nodes: int | None = None, p: int = 0) -> bytes:
        """``ExtenderArgs`` over the first ``nodes`` nodes: the body of filter and of prioritize."""
        items = [self.node(i) for i in range(self.nodes if nodes is None else nodes)]
        return orjson.dumps({"Pod": self.pod(p), "Nodes": {"metadata": {}, "items": items}, "NodeNames": None})

    def preempt(self, nodes: int = 2, victims_per_node: int = 3, p: int = 0) -> bytes:
        """``ExtenderPreemptionArgs``: ``victims_per_node`` pods proposed on each of ``nodes`` nodes."""
        victims = {self.node_name(i): {"Pods": self.victims(i, victims_per_node), "NumPDBViolations": i % 2}
                   for i in range(nodes)}
        return orjson.dumps({"Pod": self.pod(p), "NodeNameToVictims": victims, "NodeNameToMetaVictims": None})


def _without_managed_fields(pod: dict) -> dict:
    pod = copy.deepcopy(pod)
    pod["metadata"].pop("managedFields", None)
    return pod


def write_samples(directory: Path = SAMPLES) -> None:
    """samples/kube-scheduler/{filter,prioritize,preempt}.json: one real-shaped body of each verb
    (3 nodes; preempt: 2 nodes x 2 victims), indented for reading."""
    bodies = KubeBodies(nodes=3, pods_per_node=6)
    directory.mkdir(parents=True, exist_ok=True)
    three = orjson.loads(bodies.args(3))
    for name, body in (("filter", three), ("prioritize", three), ("preempt", orjson.loads(bodies.preempt(2, 2)))):
        (directory / f"{name}.json").write_text(json.dumps(body, indent=1) + "\n")


# --- the benchmark --------------------------------------------------------------------------


def scenario(verb: str, nodes: int) -> Callable:
    path = {"filter": FILTER_PATH, "prioritize": PRIORITIZE_PATH}[verb]

    def run(ctx) -> None:
        from bench.load import Connection
        from bench.runs import load_run, medians
        from bench.server import Server
        count = min(nodes, 6) if ctx.quick else nodes
        bodies = KubeBodies(count)
        body = bodies.args()
        name = f"kube-{verb}-{nodes}"
        print(f"{verb} over {count} real-shaped v1.Nodes (median {statistics.median(len(orjson.dumps(bodies.node(i))) for i in range(count)) / 1e3:.1f} KB "
              f"each, body {len(body) / 1e6:.2f} MB), one call at a time on a keep-alive connection (kube-scheduler "
              f"schedules one pod at a time); gunicorn {ctx.workers} workers x {ctx.threads} threads over loopback, "
              f"{ctx.runs} interleaved runs of {ctx.seconds:.0f} s, medians", flush=True)
        calls = [(name, path, body)]
        servers = {}
        try:
            for kind in ("bare", "service"):
                if kind in ctx.servers or kind == "service":
                    extra = ("--policy-dirs", str(KUBE_POLICY_DIR)) if kind == "service" else ()
                    servers[kind] = Server(kind, ctx.workers, ctx.threads, extra=extra).start()
            status, answer = Connection("127.0.0.1", servers["service"].port).request(path, body)
            print(f"  the service's answer: HTTP {status}, {_describe(verb, answer)}", flush=True)
            runs: dict[str, list[dict]] = {kind: [] for kind in servers}
            for server in servers.values():
                load_run(server, calls, ctx, 1, max_calls=3)  # warm-up
            order = list(servers.items())
            for round_number in range(ctx.runs):
                first = round_number % len(order)
                for kind, server in order[first:] + order[:first]:
                    runs[kind].append(load_run(server, calls, ctx, 1))
            for kind, server in servers.items():
                if any(r["errors"] for r in runs[kind]):
                    ctx.notes.append(f"{name} on {kind}: non-200 answers; server log tail: {server.stderr_tail(400)}")
        finally:
            for server in servers.values():
                server.stop()
        for kind, rows in runs.items():
            ctx.emit({"scenario": name, "server": kind, "nodes": count, "body_mb": len(body) / 1e6, **medians(rows)})
    return run


def _describe(verb: str, answer: bytes) -> str:
    try:
        reply = orjson.loads(answer)
    except orjson.JSONDecodeError:
        return f"not JSON: {answer[:200]!r}"
    if verb == "filter" and isinstance(reply, dict):
        items = (reply.get("Nodes") or {}).get("items") or []
        return (f"{len(items)} nodes fit, {len(reply.get('FailedNodes') or {})} failed, "
                f"{len(reply.get('FailedAndUnresolvableNodes') or {})} failed unresolvably, Error {reply.get('Error')!r}")
    if verb == "prioritize" and isinstance(reply, list):
        scores = [entry.get("Score") for entry in reply]
        return f"{len(scores)} scores, {sorted(set(scores))[:11]} used"
    return answer[:200].decode(errors="replace")


SCENARIOS = {f"kube-{verb}-{nodes}": scenario(verb, nodes) for verb in ("filter", "prioritize") for nodes in (100, 1000)}


if __name__ == "__main__":
    write_samples()
    print(f"wrote {SAMPLES}/filter.json, prioritize.json, preempt.json")
