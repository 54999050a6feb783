"""Plays a trace on a cluster: creates its nodes, queues and priority classes, submits its jobs at
their times, applies its events (a policy edit, a broken one, a worker killed, the service
restarted, a node cordoned, a new scheduler conf), checks the invariants as the watches report,
and measures what a user feels: pods bound per minute, how long jobs wait, Volcano's cycle time."""

from __future__ import annotations

import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import yaml

from .checks import Checks
from .control_plane import Cluster
from .kube import ApiError
from .observe import Observer
from .procs import wait_for
from .trace import Event, Job, Trace

KWOK_FAST = {  # the pod-general stages' delays (annotations KWOK reads); pod-complete is the task's duration
    "pod-create.stage.kwok.x-k8s.io/delay": "100ms", "pod-create.stage.kwok.x-k8s.io/jitter-delay": "100ms",
    "pod-ready.stage.kwok.x-k8s.io/delay": "500ms", "pod-ready.stage.kwok.x-k8s.io/jitter-delay": "500ms",
    "pod-delete.stage.kwok.x-k8s.io/delay": "100ms", "pod-delete.stage.kwok.x-k8s.io/jitter-delay": "100ms",
}


class Run:
    def __init__(self, trace: Trace, cluster: Cluster, log=print):
        self.trace, self.cluster, self.log = trace, cluster, log
        self.kube = cluster.kube
        self.submitted: dict[str, float] = {}
        self.event_log: list[str] = []
        self.edits: list[tuple[str, float]] = []    # (event, seconds until /status showed it)
        self.policy_version: str | None = None

    # -- setup ---------------------------------------------------------------------------------------
    def setup(self) -> None:
        for pc in self.trace.priority_classes:
            self.kube.create("/apis/scheduling.k8s.io/v1/priorityclasses", {
                "apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                "metadata": {"name": pc["name"]}, "value": int(pc["value"])})
        for ns in sorted({j.namespace for j in self.trace.jobs} - {"default"}):
            self.kube.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        for q in self.trace.queues:
            spec: dict[str, object] = {"weight": int(q.get("weight", 1)), "reclaimable": bool(q.get("reclaimable", True))}
            if q.get("capability"):
                spec["capability"] = {k: str(v) for k, v in q["capability"].items()}
            self.kube.create("/apis/scheduling.volcano.sh/v1beta1/queues", {
                "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": q["name"]},
                "spec": spec})
        for n in self.trace.nodes:
            self.kube.create("/api/v1/nodes", node_object(n))
        names = [n["name"] for n in self.trace.nodes]

        def ready() -> bool:
            items = self.kube.get("/api/v1/nodes?labelSelector=type%3Dkwok")["items"]
            ok = {i["metadata"]["name"] for i in items
                  if any(c["type"] == "Ready" and c["status"] == "True" for c in i["status"].get("conditions", []))}
            return set(names) <= ok
        wait_for(f"{len(names)} KWOK nodes Ready", ready, 60)

    # -- play ----------------------------------------------------------------------------------------
    def play(self) -> dict:
        if self.cluster.extender == "policy-extender":
            cm = self.kube.get("/api/v1/namespaces/volcano-system/configmaps/policy-extender-policies")
            self.policy_version = (cm["metadata"].get("annotations") or {}).get("policy-extender/policy-version")
        t0 = time.monotonic()
        self.observer = Observer(self.kube, t0)
        self.checks = Checks(self.trace, self.observer)
        self.observer.on_change = self.checks.on_change
        self.observer.start()
        timeline: list[tuple[float, str, Job | Event]] = [(j.at, "job", j) for j in self.trace.jobs]
        timeline += [(e.at, "event", e) for e in self.trace.events]
        timeline.sort(key=lambda x: x[0])
        i = 0
        last_progress = -10.0
        while True:
            now = time.monotonic() - t0
            while i < len(timeline) and timeline[i][0] <= now:
                _, kind, item = timeline[i]
                if isinstance(item, Job):
                    self.submit(item)
                else:
                    self.event(item)
                i += 1
            with self.observer.lock:
                self.checks.tick(now)
                # a job expected to stay pending is watched for the settle time after the last arrival
                done = i == len(timeline) and now >= timeline[-1][0] + self.trace.settle and self._all_judged()
            if now - last_progress >= 15:
                last_progress = now
                self.log(f"  [{now:5.0f}s] {self._progress()}")
            if done or now >= self.trace.duration:
                break
            time.sleep(0.25)
        end = time.monotonic() - t0
        self.observer.settle()
        with self.observer.lock:
            self.why_results = self._why()
            self.checks.finish(end)
            stats = self._stats(end)
        self.observer.stopping.set()
        return stats

    def _progress(self) -> str:
        world = self.observer.world
        completed = sum(1 for j in self.trace.jobs if world.job_phase(f"{j.namespace}/{j.name}") == "Completed")
        bound = sum(1 for p in world.pods.values() if p.node)
        return (f"{len(self.submitted)}/{len(self.trace.jobs)} jobs submitted, {completed} completed, "
                f"{bound} pods bound")

    def _all_judged(self) -> bool:
        """Every job expected to finish has (a job expected to stay pending is watched until the
        settle time after the last arrival, or the trace's duration)."""
        world = self.observer.world
        return all(world.job_phase(f"{j.namespace}/{j.name}") == "Completed"
                   for j in self.trace.jobs if j.expect == "finishes")

    def submit(self, job: Job) -> None:
        self.submitted[f"{job.namespace}/{job.name}"] = time.monotonic()
        try:
            self.kube.create(f"/apis/batch.volcano.sh/v1alpha1/namespaces/{job.namespace}/jobs", vcjob(job))
        except ApiError as e:
            self.checks.fail("submit", self.observer.now(), f"job {job.namespace}/{job.name} refused: {e}")

    def event(self, ev: Event) -> None:
        c = self.cluster
        t = self.observer.now()
        self.event_log.append(f"{t:.1f}s {ev.kind} {ev.arg if not isinstance(ev.arg, dict) else ''}".rstrip())
        self.log(f"  [{t:5.0f}s] event: {ev.kind} {ev.arg if isinstance(ev.arg, (str, Path)) else ''}")
        if ev.kind == "apply-policies":
            with tempfile.TemporaryDirectory() as tmp:
                c.apply_policies(policy_dir(ev.arg, Path(tmp)), self.trace.values)
            self._served("apply-policies", t, broken=False)
        elif ev.kind == "break-policy":
            # what a hand edit of the live ConfigMap does (kubectl edit): the configmap command
            # refuses a set that does not compile, so this bypasses it
            patch = {"data": {ev.arg["file"]: ev.arg["text"]}}
            c.kube.patch("/api/v1/namespaces/volcano-system/configmaps/policy-extender-policies", patch)
            self._served("break-policy", t, broken=True)
        elif ev.kind == "kill-worker":
            popen = c.procs["policy-extender"].popen
            assert popen is not None
            master = popen.pid
            workers = children(master)
            if not workers:
                self.checks.fail("event", t, f"kill-worker: the service (pid {master}) has no workers")
                return
            os.kill(workers[0], signal.SIGKILL)
        elif ev.kind == "restart-service":
            # the window opens before the stop: the checks run on the watches' thread meanwhile
            window = [self.observer.now(), float("inf")]
            self.checks.down_windows.append(window)
            c.procs["policy-extender"].stop()
            c.start_serve()
            window[1] = self.observer.now()
            self.log(f"  [{window[1]:5.0f}s] the service was down {window[1] - window[0]:.1f}s")
        elif ev.kind in ("cordon", "uncordon"):
            c.kube.kubectl(ev.kind, ev.arg)
        elif ev.kind == "label":
            c.kube.kubectl("label", "node", ev.arg["node"], "--overwrite",
                           *(f"{k}={v}" if v is not None else f"{k}-" for k, v in ev.arg["labels"].items()))
        elif ev.kind == "scheduler-conf":
            text = Path(ev.arg["from"]).read_text()
            for old, new in (ev.arg.get("replace") or {}).items():
                if old not in text:
                    self.checks.fail("event", t, f"scheduler-conf: {old!r} is not in {ev.arg['from']}")
                text = text.replace(old, new)
            loads = c.procs["vc-scheduler"].log_path.read_text(errors="replace").count("Finished loading scheduler config")
            cm = {"apiVersion": "v1", "kind": "ConfigMap",
                  "metadata": {"name": "volcano-scheduler-configmap", "namespace": "volcano-system"},
                  "data": {"volcano-scheduler.conf": text}}
            c.kube.kubectl("apply", "-f", "-", input=yaml.safe_dump(cm))
            # Volcano watches the file and loads it again: its log says so
            start = time.monotonic()
            while time.monotonic() - start < 30:
                log = c.procs["vc-scheduler"].log_path.read_text(errors="replace")
                if log.count("Finished loading scheduler config") > loads:
                    self.edits.append(("scheduler-conf", round(time.monotonic() - start, 2)))
                    self.checks.counted["checked scheduler-conf"] += 1
                    break
                time.sleep(0.2)
            else:
                self.checks.fail("scheduler-conf", t, "vc-scheduler did not load the new conf within 30 s")
        elif ev.kind == "delete-job":
            ns, _, name = str(ev.arg).rpartition("/")
            self.observer.world.deleted_by_harness.add(f"{ns or 'default'}/{name}")
            c.kube.delete(f"/apis/batch.volcano.sh/v1alpha1/namespaces/{ns or 'default'}/jobs/{name}")

    def _served(self, what: str, t: float, broken: bool, timeout: float = 30) -> None:
        """After an edit of the live ConfigMap: the service serves the new version (the ConfigMap's
        policy-version annotation), or for a broken edit keeps serving the last good one and
        reports the error on /status. How long it took is kept (policy_edit_s)."""
        c = self.cluster
        if c.extender != "policy-extender":
            return
        cm = c.kube.get("/api/v1/namespaces/volcano-system/configmaps/policy-extender-policies")
        wanted = (cm["metadata"].get("annotations") or {}).get("policy-extender/policy-version")
        start = time.monotonic()
        status: dict = {}
        while time.monotonic() - start < timeout:
            with urllib.request.urlopen(f"http://{c.ops}/status", timeout=5) as r:
                status = json.loads(r.read())
            policy = status["policy"]
            if broken and policy["errors"] and policy["version"] == self.policy_version:
                self.edits.append((what, round(time.monotonic() - start, 2)))
                self.checks.counted[f"checked {what}"] += 1
                return
            if not broken and wanted and policy["version"] == wanted and not policy["errors"]:
                self.policy_version = wanted
                self.edits.append((what, round(time.monotonic() - start, 2)))
                self.checks.counted[f"checked {what}"] += 1
                return
            time.sleep(0.2)
        self.checks.fail(what, t, f"{what}: after {timeout:.0f}s /status shows version "
                         f"{status.get('policy_version')} with errors {status.get('policy', {}).get('errors')}; "
                         + ("expected the last good version kept and the error reported" if broken
                            else f"expected version {wanted} without errors"))

    # -- the end -------------------------------------------------------------------------------------
    def _why(self) -> list[tuple[dict, int, str]]:
        results: list[tuple[dict, int, str]] = []
        if self.cluster.extender != "policy-extender":
            return results
        for rule in self.trace.invariants.get("why", []):
            proc = subprocess.run([sys.executable, "-m", "policy_extender", "why", rule["name"],
                                   "--url", f"http://{self.cluster.ops}"], capture_output=True, text=True, timeout=30)
            out = proc.stdout + proc.stderr
            results.append((rule, proc.returncode, out))
            if proc.returncode != 0 or rule.get("contains", "") not in out:
                self.checks.fail("why", self.observer.now(),
                                 f"policy-extender why {rule['name']}: exit {proc.returncode}, expected "
                                 f"{rule.get('contains', '')!r} in: {out.strip()[:400]}")
            else:
                self.checks.counted[f"checked why {rule['name']}"] += 1
        return results

    def _stats(self, end: float) -> dict:
        world = self.observer.world
        binds = sorted(p.bound_at for p in world.pods.values() if p.bound_at is not None)
        waits = []
        for j in self.trace.jobs:
            times = sorted(p.bound_at for p in world.pods.values()
                           if p.job == j.name and p.namespace == j.namespace and p.bound_at is not None)
            if len(times) >= j.min_available:
                waits.append(times[j.min_available - 1] - (self.submitted[f"{j.namespace}/{j.name}"]
                                                           - self.observer.t0))
        span = (binds[-1] - binds[0]) if len(binds) > 1 else 0.0
        cycle = scheduler_cycle_ms(self.cluster)
        verbs = service_verbs(self.cluster)
        return {
            "duration_s": round(end, 1),
            "pods_bound": len(binds),
            "binds_per_minute": round(len(binds) / span * 60, 1) if span > 0 else None,
            "jobs_started": len(waits),
            "wait_p50_s": round(statistics.median(waits), 2) if waits else None,
            "wait_p99_s": round(percentile(waits, 0.99), 2) if waits else None,
            "evictions": sum(1 for p in world.pods.values() if p.evicted),
            "service_down_s": round(sum(b - a for a, b in self.checks.down_windows), 1),
            "policy_edits_s": [s for _, s in self.edits],
            **cycle,
            **({"service_verbs": verbs} if verbs else {}),
            **({"service_warnings": warnings} if (warnings := service_warnings(self.cluster)) else {}),
            "late_open_warnings": late_open_warnings(self.cluster),
        }


def policy_dir(arg: dict, tmp: Path) -> Path:
    """apply-policies' directory: `from` (relative to the trace) with files added and removed."""
    src = Path(arg["from"])
    for f in sorted(src.glob("*.policy")):
        if f.name not in arg.get("remove", []):
            (tmp / f.name).write_text(f.read_text())
    for name, text in (arg.get("add") or {}).items():
        (tmp / name).write_text(text)
    if arg.get("values"):
        (tmp / "values.yaml").write_text(Path(arg["values"]).read_text())
    return tmp


def percentile(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(round(q * (len(s) - 1))))]


def scheduler_cycle_ms(cluster: Cluster) -> dict:
    """Volcano's e2e_scheduling_latency_milliseconds (one whole cycle: open, actions, close) from
    vc-scheduler's /metrics: its mean and the median read off the histogram's buckets."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{cluster.ports['vcs-metrics']}/metrics", timeout=5) as r:
            text = r.read().decode()
    except OSError:
        return {}
    buckets, total, count = [], 0.0, 0
    for line in text.splitlines():
        if line.startswith("volcano_e2e_scheduling_latency_milliseconds_bucket"):
            le = line.split('le="', 1)[1].split('"', 1)[0]
            buckets.append((float("inf") if le == "+Inf" else float(le), float(line.rsplit(" ", 1)[1])))
        elif line.startswith("volcano_e2e_scheduling_latency_milliseconds_sum"):
            total = float(line.rsplit(" ", 1)[1])
        elif line.startswith("volcano_e2e_scheduling_latency_milliseconds_count"):
            count = int(float(line.rsplit(" ", 1)[1]))
    if not count:
        return {}
    median = next((le for le, n in buckets if n >= count / 2), None)
    return {"cycles": count, "cycle_mean_ms": round(total / count, 1), "cycle_p50_bucket_ms": median}


def service_verbs(cluster: Cluster) -> dict:
    """Per verb, the calls policy-extender answered and their mean time (its
    policy_extender_request_duration_seconds, from body read to response): where a cycle's time
    in the service goes."""
    if cluster.extender != "policy-extender":
        return {}
    try:
        with urllib.request.urlopen(f"http://{cluster.ops}/metrics", timeout=5) as r:
            text = r.read().decode()
    except OSError:
        return {}
    sums: dict[str, float] = {}
    counts: dict[str, float] = {}
    for line in text.splitlines():
        for suffix, into in (("_sum{", sums), ("_count{", counts)):
            if line.startswith("policy_extender_request_duration_seconds" + suffix):
                verb = line.split('verb="', 1)[1].split('"', 1)[0]
                into[verb] = into.get(verb, 0.0) + float(line.rsplit(" ", 1)[1])
    return {v: {"calls": int(counts[v]), "mean_ms": round(sums[v] / counts[v] * 1000, 2), "total_s": round(sums[v], 1)}
            for v in sorted(counts) if counts[v]}


def service_warnings(cluster: Cluster) -> dict[str, int]:
    """WARNING and ERROR lines of the service's log, by logger: what an operator's log holds."""
    proc = cluster.procs.get("policy-extender")
    if proc is None:
        return {}
    found: dict[str, int] = {}
    for line in proc.log_path.read_text(errors="replace").splitlines():
        if line.startswith("{") and ('"level": "WARNING"' in line or '"level": "ERROR"' in line):
            try:
                logger = json.loads(line).get("logger", "?")
            except ValueError:
                continue
            found[logger] = found.get(logger, 0) + 1
    return found


def late_open_warnings(cluster: Cluster) -> int:
    """The service's "onSessionOpen took ... longer than volcano_timeout" lines: each says Volcano
    gave up on an open (vc-scheduler's log then shows "OnSessionOpen failed")."""
    proc = cluster.procs.get("policy-extender")
    if proc is None:
        return 0
    return proc.log_path.read_text(errors="replace").count("longer than volcano_timeout")


def children(pid: int) -> list[int]:
    try:
        return [int(x) for x in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def node_object(n: dict) -> dict:
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": n["name"], "labels": {"type": "kwok", "kubernetes.io/hostname": n["name"], **n["labels"]},
                     "annotations": {"node.alpha.kubernetes.io/ttl": "0", "kwok.x-k8s.io/node": "fake"}},
        "spec": {"taints": n["taints"]},
        "status": {"capacity": n["capacity"], "allocatable": n["capacity"],
                   "nodeInfo": {"kubeletVersion": "kwok-v0.8.0", "architecture": "amd64", "operatingSystem": "linux"}},
    }


def vcjob(job: Job) -> dict:
    """The Volcano Job as vc-webhook-manager's mutation would leave it (the webhook does not run
    here): schedulerName, queue and minAvailable set, each task's minAvailable its replicas."""
    tasks = []
    for t in job.tasks:
        resources = {"requests": dict(t.requests), "limits": dict(t.requests)}
        annotations = {**KWOK_FAST, "pod-complete.stage.kwok.x-k8s.io/delay": f"{int(t.duration * 1000)}ms",
                       "pod-complete.stage.kwok.x-k8s.io/jitter-delay": f"{int(t.duration * 1000)}ms",
                       **t.annotations}
        tasks.append({"name": t.name, "replicas": t.replicas, "minAvailable": t.replicas,
                      "template": {"metadata": {"labels": {**job.labels, **t.labels}, "annotations": annotations},
                                   "spec": {"schedulerName": "volcano", "restartPolicy": "Never",
                                            **({"priorityClassName": job.priority_class} if job.priority_class else {}),
                                            "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10",
                                                            "resources": resources}]}}})
    spec = {"schedulerName": "volcano", "queue": job.queue, "minAvailable": job.min_available, "tasks": tasks,
            "maxRetry": 3}
    if job.priority_class:
        spec["priorityClassName"] = job.priority_class
    return {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
            "metadata": {"name": job.name, "namespace": job.namespace, "labels": dict(job.labels)}, "spec": spec}
