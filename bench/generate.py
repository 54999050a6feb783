"""A synthetic Volcano cluster, deterministic by seed, and every request body the scheduler sends.

Every object is a pure function of (seed, its identity), so a pod is built the same way when it
is written into its node's ``Tasks`` and again into its job: nothing has to be kept in memory
to write a 268 MB snapshot, which is streamed to a file.

Layout of node ``i`` (``pods_per_node`` = P slots):

* slot 0 and 1: DaemonSet pods (kube-proxy, node-exporter), no Volcano job;
* the next ``volcano_slots`` slots: running Volcano job tasks. Running job ``r`` owns the global
  ordinals ``r*K .. r*K+K-1`` and ordinal ``g`` sits on node ``g % N`` slot ``2 + g // N``, so a
  job's tasks are spread over neighbouring nodes;
* the remaining slots: Deployment pods (ReplicaSet owner, not Volcano jobs).

Pending jobs carry ``tasks_per_pending_job`` Pending tasks each; these are the tasks the bodies
for predicate/prioritize/allocate ask about.

Run ``python -m bench.generate`` to print the body sizes at the wire doc's cluster sizes.
"""

from __future__ import annotations

import functools
import io
import random
import re
import sys
from dataclasses import dataclass, field
from typing import BinaryIO, Iterable

import orjson

from bench import objects as o

ZONES = ("zone-a", "zone-b", "zone-c")
NAMESPACES = ("ml", "team-a", "team-b")
QUEUES = ("gpu-batch", "restricted", "default")
ZONE_ANNOTATION = "scheduling.example.com/zone"
NODE_MILLI_CPU = 63500
NODE_MEMORY = 534399804 * 1024
STATUS_PENDING, STATUS_ALLOCATED, STATUS_RUNNING = 1, 2, 32


@dataclass(frozen=True)
class ClusterSpec:
    nodes: int = 50
    pods_per_node: int = 20
    pending_jobs: int = 0            # 0: nodes // 3 (at least 4)
    tasks_per_pending_job: int = 4
    running_job_size: int = 4
    volcano_share: float = 0.40      # share of the non-DaemonSet slots that run Volcano job tasks
    revocable_every: int = 16        # every n-th node is listed again under RevocableNodes
    seed: int = 1

    @property
    def volcano_slots(self) -> int:
        return round(self.volcano_share * max(self.pods_per_node - 2, 0))

    @property
    def pending_job_count(self) -> int:
        return self.pending_jobs or max(4, self.nodes // 3)


@dataclass(frozen=True)
class NodeProfile:
    zone: str
    pool: str
    instance: str
    gpu_product: str | None
    gpus: int
    busy_gpus: int


@dataclass(frozen=True)
class JobMeta:
    uid: str
    job_uid: str     # the batch.volcano.sh Job's own uid (owner reference)
    pg_uid: str
    name: str        # short job name (volcano.sh/job-name)
    group: str       # PodGroup name
    namespace: str
    queue: str
    priority_class: str
    priority: int
    gpus: int
    zone: str | None
    created: str


# --- splicing pre-serialised JSON ---------------------------------------------------------------

_HOLE = re.compile(rb'"\\u0000H(\d+)"')


@dataclass
class Splice:
    """Builds JSON with holes that are filled with already-serialised bytes (a task is serialised
    once and written into its node, its job's Tasks, TaskStatusIndex and SubJobs)."""

    blobs: list[bytes] = field(default_factory=list)

    def hole(self, blob: bytes) -> str:
        self.blobs.append(blob)
        return f"\x00H{len(self.blobs) - 1}"

    def dumps(self, obj) -> bytes:
        return _HOLE.sub(lambda m: self.blobs[int(m.group(1))], orjson.dumps(obj))


def dumps(obj) -> bytes:
    return orjson.dumps(obj)


class Cluster:
    def __init__(self, spec: ClusterSpec):
        self.spec = spec
        self.node_names = [f"node-{i:04d}" for i in range(spec.nodes)]
        self.running_ordinals = spec.nodes * spec.volcano_slots
        self.running_jobs = -(-self.running_ordinals // spec.running_job_size) if self.running_ordinals else 0

    def rng(self, *key) -> random.Random:
        return random.Random("/".join(map(str, (self.spec.seed, *key))))

    # --- nodes ---------------------------------------------------------------------------

    @functools.lru_cache(maxsize=None)
    def profile(self, i: int) -> NodeProfile:
        rng = self.rng("node-profile", i)
        kind = rng.random()
        zone, pool = ZONES[i % 3], rng.choice(("online", "batch"))
        if kind < 0.45:
            return NodeProfile(zone, pool, "p4d.24xlarge", "NVIDIA-A100-SXM4-80GB", 8, rng.randint(0, 7))
        if kind < 0.6:
            return NodeProfile(zone, pool, "p5.48xlarge", "NVIDIA-H100-80GB-HBM3", 8, rng.randint(0, 7))
        if kind < 0.75:
            return NodeProfile(zone, pool, "g6e.12xlarge", "NVIDIA-L40S", 4, rng.randint(0, 3))
        return NodeProfile(zone, pool, "m6i.24xlarge", None, 0, 0)

    def k8s_node(self, i: int) -> dict:
        p = self.profile(i)
        taints = [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}] if p.gpus else []
        return o.k8s_node(self.rng("node", i), name=self.node_names[i], index=i, zone=p.zone, pool=p.pool, instance=p.instance,
                          gpu_product=p.gpu_product, gpus=p.gpus, milli_cpu=NODE_MILLI_CPU, memory=NODE_MEMORY, taints=taints)

    def node_resources(self, i: int) -> tuple[dict, dict]:
        gpus = self.profile(i).gpus * 1000
        scalars = {"ephemeral-storage": o.EPHEMERAL_ALLOCATABLE * 1000, "hugepages-1Gi": 0, "hugepages-2Mi": 0}
        if gpus:
            scalars["nvidia.com/gpu"] = gpus
        allocatable = o.resource(NODE_MILLI_CPU, NODE_MEMORY, {**scalars, "pods": 110}, 110)
        capacity = o.resource(NODE_MILLI_CPU + 500, NODE_MEMORY + 2 * o.GIB,
                              {**scalars, "ephemeral-storage": o.EPHEMERAL_CAPACITY * 1000, "pods": 110}, 110)
        return allocatable, capacity

    def node_tasks(self, i: int) -> list[dict]:
        return [self.pod_task(i, s) for s in range(self.spec.pods_per_node)]

    def node_info(self, i: int, tasks: list[dict] | None = None, splice: Splice | None = None) -> dict:
        """The NodeInfo of node ``i``. With ``splice``, each task is serialised once into a hole."""
        tasks = self.node_tasks(i) if tasks is None else tasks
        allocatable, capacity = self.node_resources(i)
        used = _sum_requests(tasks)
        keyed = {f"{t['Namespace']}/{t['Name']}": (splice.hole(dumps(t)) if splice else t) for t in tasks}
        return o.node_info(name=self.node_names[i], node_obj=self.k8s_node(i), allocatable=allocatable, capacity=capacity,
                           used=used, tasks=dict(sorted(keyed.items())))

    @functools.lru_cache(maxsize=None)
    def node_bytes(self, i: int) -> bytes:
        splice = Splice()
        return splice.dumps(self.node_info(i, splice=splice))

    # --- pods on nodes -------------------------------------------------------------------

    def slot_kind(self, s: int) -> str:
        if s == 0:
            return "kube-proxy"
        if s == 1:
            return "node-exporter"
        return "volcano" if s < 2 + self.spec.volcano_slots else "deployment"

    def pod_task(self, i: int, s: int) -> dict:
        kind = self.slot_kind(s)
        if kind == "volcano":
            return self.running_task(self.spec.nodes * (s - 2) + i)
        rng = self.rng("pod", i, s)
        if kind == "deployment":
            return self._deployment_task(rng, i, s)
        return self._daemon_task(rng, i, kind)

    def _daemon_task(self, rng: random.Random, i: int, app: str) -> dict:
        ns, image = ("kube-system", "registry.k8s.io/kube-proxy:v1.30.4") if app == "kube-proxy" else ("monitoring", "quay.io/prometheus/node-exporter:v1.8.1")
        cpu, mem = (100, 128 * o.MIB) if app == "kube-proxy" else (50, 64 * o.MIB)
        owner = {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": app, "uid": new_uid_for(self, "ds", app), "controller": True, "blockOwnerDeletion": True}
        labels = {"app.kubernetes.io/name": app, "controller-revision-hash": f"{rng.getrandbits(40):010x}", "pod-template-generation": "3"}
        prio, pclass = (2000001000, "system-node-critical") if app == "kube-proxy" else (0, None)
        return self._task(rng, i, name=f"{app}-{rng.getrandbits(20):05x}", ns=ns, labels=labels, annotations=None, owner=owner,
                          image=image, cpu=cpu, mem=mem, gpus=0, pclass=pclass, prio=prio, controller="kube-controller-manager",
                          job="", role="", status=STATUS_RUNNING)

    def _deployment_task(self, rng: random.Random, i: int, s: int) -> dict:
        app = rng.choice(("frontend", "api", "ingest", "cache"))
        rs = f"{app}-{rng.getrandbits(40):010x}"
        owner = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": rs, "uid": new_uid_for(self, "rs", app), "controller": True, "blockOwnerDeletion": True}
        image = {"frontend": "docker.io/library/nginx:1.27", "api": "ghcr.io/example/api-server:v5.2.0",
                 "ingest": "docker.io/grafana/promtail:3.0.0", "cache": "docker.io/bitnami/redis:7.2"}[app]
        return self._task(rng, i, name=f"{rs}-{rng.getrandbits(20):05x}", ns="prod", labels={"app": app, "pod-template-hash": rs.split("-")[-1]},
                          annotations={"kubectl.kubernetes.io/restartedAt": "2025-05-30T08:00:00Z"}, owner=owner, image=image,
                          cpu=rng.choice((250, 500, 1000)), mem=rng.choice((1, 2, 4)) * o.GIB, gpus=0, pclass="online-high", prio=1000,
                          controller="kube-controller-manager", job="", role="", status=STATUS_RUNNING)

    def _task(self, rng, i, *, name, ns, labels, annotations, owner, image, cpu, mem, gpus, pclass, prio, controller, job, role, status,
              init=False) -> dict:
        node_name = self.node_names[i] if i is not None else ""
        pod = o.pod(rng, name=name, namespace=ns, uid=o.new_uid(rng), labels=labels, annotations=annotations, owner=owner, image=image,
                    milli_cpu=cpu, memory=mem, gpus=gpus, node_name=node_name,
                    host_ip=f"10.0.{(i or 0) // 250}.{10 + (i or 0) % 250}", pod_ip=f"10.{244 + (i or 0) // 256}.{(i or 0) % 256}.{rng.randint(2, 250)}",
                    priority_class=pclass, priority=prio, controller=controller, running=status == STATUS_RUNNING, init_container=init)
        return o.task_info(pod_obj=pod, job=job, role=role, milli_cpu=cpu, memory=mem, gpus=gpus, status=status, priority=prio)

    # --- jobs ----------------------------------------------------------------------------

    @functools.lru_cache(maxsize=4096)
    def job_meta(self, kind: str, r: int) -> JobMeta:
        rng = self.rng("job", kind, r)
        name = f"run-{r:05d}" if kind == "running" else f"job-{r:04d}"
        job_uid, pg_uid, ns = o.new_uid(rng), o.new_uid(rng), NAMESPACES[r % 3]
        gpus = 0 if kind == "running" else rng.choice((0, 1, 1, 2, 2, 4))
        zone = ZONES[r % 3] if kind == "pending" and r % 2 == 0 else None
        pclass, prio = rng.choice((("batch-normal", 1000), ("batch-high", 10000)))
        group = f"{name}-{job_uid}"
        return JobMeta(uid=f"{ns}/{group}", job_uid=job_uid, pg_uid=pg_uid, name=name, group=group, namespace=ns,
                       queue=QUEUES[r % len(QUEUES)], priority_class=pclass, priority=prio, gpus=gpus, zone=zone, created=o.timestamp(rng, 6))

    def _job_task(self, meta: JobMeta, index: int, rng: random.Random, *, node: int | None, gpus: int, status: int) -> dict:
        labels = {"volcano.sh/job-name": meta.name, "volcano.sh/job-namespace": meta.namespace, "volcano.sh/queue-name": meta.queue,
                  "volcano.sh/task-index": str(index), "volcano.sh/task-spec": "worker"}
        annotations = {ZONE_ANNOTATION: meta.zone} if meta.zone else {}
        annotations.update({"scheduling.k8s.io/group-name": meta.group, "volcano.sh/job-name": meta.name, "volcano.sh/job-version": "0",
                            "volcano.sh/queue-name": meta.queue, "volcano.sh/task-index": str(index), "volcano.sh/task-spec": "worker",
                            "volcano.sh/template-uid": f"{meta.name}-worker"})
        owner = {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "name": meta.name, "uid": meta.job_uid, "controller": True, "blockOwnerDeletion": True}
        image = "ghcr.io/example/trainer:v2.3.1" if gpus else "ghcr.io/example/etl-worker:v1.9.0"
        return self._task(rng, node, name=f"{meta.name}-worker-{index}", ns=meta.namespace, labels=labels, annotations=annotations,
                          owner=owner, image=image, cpu=rng.choice((500, 1000, 1500, 2000)), mem=rng.choice((2, 4, 8, 16)) * o.GIB,
                          gpus=gpus, pclass=meta.priority_class, prio=meta.priority, controller="vc-controller-manager",
                          job=meta.uid, role="worker", status=status, init=index == 0)

    def running_task(self, g: int) -> dict:
        n, k = self.spec.nodes, self.spec.running_job_size
        i, volcano_index = g % n, g // n
        busy = self.profile(i).busy_gpus
        return self._job_task(self.job_meta("running", g // k), g % k, self.rng("pod", "running", g), node=i,
                              gpus=1 if volcano_index < busy else 0, status=STATUS_RUNNING)

    def pending_task(self, p: int, t: int, *, node: int | None = None, status: int = STATUS_PENDING) -> dict:
        meta = self.job_meta("pending", p)
        return self._job_task(meta, t, self.rng("pod", "pending", p, t), node=node, gpus=meta.gpus, status=status)

    def running_job_tasks(self, r: int) -> list[dict]:
        k = self.spec.running_job_size
        return [self.running_task(g) for g in range(r * k, min((r + 1) * k, self.running_ordinals))]

    def pending_job_tasks(self, p: int, status: int = STATUS_PENDING) -> list[dict]:
        nodes = [None] * self.spec.tasks_per_pending_job if status == STATUS_PENDING else list(range(self.spec.tasks_per_pending_job))
        return [self.pending_task(p, t, node=n, status=status) for t, n in enumerate(nodes)]

    def job_info(self, kind: str, r: int, tasks: list[dict], splice: Splice | None = None) -> dict:
        meta = self.job_meta(kind, r)
        rng = self.rng("podgroup", kind, r)
        placed = [t for t in tasks if t["Status"] != STATUS_PENDING]
        min_res = {"cpu": "500m", "memory": "4Gi", **({"nvidia.com/gpu": str(meta.gpus)} if meta.gpus else {})} if kind == "pending" else None
        pg = o.pod_group(rng, name=meta.group, namespace=meta.namespace, job_name=meta.name, job_uid=meta.job_uid, pg_uid=meta.pg_uid,
                         created=meta.created, queue=meta.queue, min_member=len(tasks), role="worker", priority_class=meta.priority_class,
                         running=len(placed), min_resources=min_res)
        keyed = {t["UID"]: (splice.hole(dumps(t)) if splice else t) for t in tasks}
        return o.job_info(uid=meta.uid, pg_uid=meta.pg_uid, name=meta.group, namespace=meta.namespace, queue=meta.queue,
                          priority=meta.priority, min_available=len(tasks), role="worker",
                          task_status={t["UID"]: t["Status"] for t in tasks}, allocated=_sum_requests(placed),
                          total_request=_sum_requests(tasks), created=meta.created, podgroup=pg, tasks=keyed)

    def job_bytes(self, kind: str, r: int, status: int = STATUS_PENDING) -> bytes:
        tasks = self.running_job_tasks(r) if kind == "running" else self.pending_job_tasks(r, status)
        splice = Splice()
        return splice.dumps(self.job_info(kind, r, tasks, splice))

    # --- queues and namespaces -------------------------------------------------------------

    def queues(self) -> dict:
        rng = self.rng("queues")
        return {
            "default": o.queue_info(rng, name="default", weight=1, capability=None, reclaimable=True, parent="root", pending=1, running=2),
            "gpu-batch": o.queue_info(rng, name="gpu-batch", weight=4, capability={"cpu": "512", "memory": "4Ti", "nvidia.com/gpu": "32"},
                                      reclaimable=True, parent="root", pending=1, running=0),
            "restricted": o.queue_info(rng, name="restricted", weight=1, capability={"cpu": "64", "memory": "256Gi"}, reclaimable=False,
                                       parent="root", pending=1, running=1),
            "root": o.queue_info(rng, name="root", weight=1, capability=None, reclaimable=False, parent=None, pending=0, running=0),
        }

    def namespaces(self) -> dict:
        return {
            "ml": o.namespace_info("ml", {"hard": {"count/pods": "500", "requests.nvidia.com/gpu": "64"}, "used": {"count/pods": "87", "requests.nvidia.com/gpu": "12"}}),
            "team-a": o.namespace_info("team-a", {"hard": {"requests.cpu": "256", "requests.memory": "1Ti", "requests.nvidia.com/gpu": "16"},
                                                  "used": {"requests.cpu": "37500m", "requests.memory": "151Gi", "requests.nvidia.com/gpu": "6"}}),
        }


def new_uid_for(cluster: Cluster, *key) -> str:
    return o.new_uid(cluster.rng("uid", *key))


def _sum_requests(tasks: Iterable[dict]) -> dict:
    cpu = mem = 0
    scalars: dict[str, int] = {}
    for t in tasks:
        req = t["Resreq"]
        cpu, mem = cpu + req["MilliCPU"], mem + req["Memory"]
        for k, v in (req["ScalarResources"] or {}).items():
            scalars[k] = scalars.get(k, 0) + v
    return o.resource(cpu, mem, scalars or None)


# --- request bodies -------------------------------------------------------------------------------

class Bodies:
    """Every verb's request body for one cluster, as compact JSON bytes (what goes on the wire)."""

    def __init__(self, cluster: Cluster):
        self.cluster = cluster

    def task(self, p: int = 0, t: int = 0) -> bytes:
        return dumps(self.cluster.pending_task(p, t))

    def predicate(self, node: int, p: int = 0, t: int = 0) -> bytes:
        return b'{"task":' + self.task(p, t) + b',"node":' + self.cluster.node_bytes(node) + b"}"

    def predicates(self, p: int = 0, t: int = 0) -> list[bytes]:
        task = self.task(p, t)
        return [b'{"task":' + task + b',"node":' + self.cluster.node_bytes(i) + b"}" for i in range(self.cluster.spec.nodes)]

    def prioritize(self, nodes: Iterable[int] | None = None, p: int = 0, t: int = 0) -> bytes:
        nodes = range(self.cluster.spec.nodes) if nodes is None else nodes
        return b'{"task":' + self.task(p, t) + b',"nodes":[' + b",".join(self.cluster.node_bytes(i) for i in nodes) + b"]}"

    def victims(self, p: int = 0, node: int = 0, count: int = 4) -> bytes:
        """preemptable / reclaimable: the pending task against running Volcano tasks of one node."""
        evictees = [t for t in self.cluster.node_tasks(node) if t["Job"]][:count]
        evictor = self.cluster.pending_task(p, 0)
        evictor["Pod"]["spec"]["nodeName"] = self.cluster.node_names[node]   # as in the samples: the node preemption is tried on
        return b'{"evictor":' + dumps(evictor) + b',"evictees":[' + b",".join(dumps(t) for t in evictees) + b"]}"

    def job(self, p: int = 0, status: int = STATUS_PENDING) -> bytes:
        return b'{"job":' + self.cluster.job_bytes("pending", p, status) + b"}"

    def queue(self, name: str = "gpu-batch") -> bytes:
        return dumps({"queue": self.cluster.queues()[name]})

    def allocate(self, p: int = 0, t: int = 0, node: int = 0) -> bytes:
        return dumps({"task": self.cluster.pending_task(p, t, node=node, status=STATUS_ALLOCATED)})

    def close(self) -> bytes:
        return b"{}"

    def snapshot(self) -> bytes:
        buf = io.BytesIO()
        write_snapshot(self.cluster, buf)
        return buf.getvalue()


def write_snapshot(cluster: Cluster, out: BinaryIO) -> int:
    """Streams the onSessionOpen body to ``out`` one object at a time; returns bytes written."""
    written = 0

    def put(chunk: bytes) -> None:
        nonlocal written
        out.write(chunk)
        written += len(chunk)

    put(b'{"Jobs":{')
    jobs = [("running", r) for r in range(cluster.running_jobs)] + [("pending", p) for p in range(cluster.spec.pending_job_count)]
    for n, (kind, r) in enumerate(jobs):
        put((b"," if n else b"") + dumps(cluster.job_meta(kind, r).uid) + b":" + cluster.job_bytes(kind, r))
    put(b'},"Nodes":{')
    revocable, every = [], min(cluster.spec.revocable_every, cluster.spec.nodes)
    for i, name in enumerate(cluster.node_names):
        node = _uncached_node_bytes(cluster, i)
        put((b"," if i else b"") + dumps(name) + b":" + node)
        if every and i % every == every - 1:
            revocable.append(i)
    put(b'},"Queues":' + dumps(cluster.queues()) + b',"NamespaceInfo":' + dumps(cluster.namespaces()) + b',"RevocableNodes":{')
    for n, i in enumerate(revocable):
        put((b"," if n else b"") + dumps(cluster.node_names[i]) + b":" + _uncached_node_bytes(cluster, i))
    put(b'},"NodeList":null}')
    return written


def _uncached_node_bytes(cluster: Cluster, i: int) -> bytes:
    splice = Splice()
    return splice.dumps(cluster.node_info(i, splice=splice))


def main(argv: list[str]) -> None:
    """Prints the body sizes at the wire doc's cluster sizes (and writes the big snapshot to a temp file)."""
    import statistics
    import tempfile
    import time

    for nodes, pods in ((50, 20), (50, 30), (500, 30)):
        bodies = Bodies(Cluster(ClusterSpec(nodes=nodes, pods_per_node=pods)))
        preds = [len(bodies.predicate(i)) for i in range(min(nodes, 50))]
        print(f"{nodes} nodes x {pods} pods: predicate median {statistics.median(preds) / 1e3:.0f} KB", flush=True)
    for nodes, pods in ((50, 20), (500, 30)):
        cluster = Cluster(ClusterSpec(nodes=nodes, pods_per_node=pods))
        bodies = Bodies(cluster)
        if nodes == 50:
            print(f"  prioritize over all {nodes}: {len(bodies.prioritize()) / 1e6:.1f} MB; job {len(bodies.job()) / 1e3:.0f} KB; "
                  f"preemptable {len(bodies.victims()) / 1e3:.0f} KB; allocate {len(bodies.allocate()) / 1e3:.1f} KB")
        start = time.perf_counter()
        with tempfile.NamedTemporaryFile(prefix=f"snapshot-{nodes}x{pods}-", suffix=".json", delete="--keep" not in argv) as f:
            size = write_snapshot(cluster, f)
            print(f"{nodes} nodes x {pods} pods: onSessionOpen {size / 1e6:.1f} MB in {time.perf_counter() - start:.1f} s -> {f.name}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
