"""What the cluster does, seen through the API server's watches: every pod bind, finish and
eviction, every node change, every event, with the harness's clock. One thread per watch feeds
one queue; the checks read the state it builds, in order, on one thread (checks.py)."""

from __future__ import annotations

import queue
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from .kube import ApiError, Kube

WATCHES = {
    "pods": "/api/v1/pods",
    "nodes": "/api/v1/nodes",
    "events": "/api/v1/events",
    "podgroups": "/apis/scheduling.volcano.sh/v1beta1/podgroups",
    "jobs": "/apis/batch.volcano.sh/v1alpha1/jobs",
}


@dataclass
class Pod:
    uid: str
    namespace: str
    name: str
    labels: dict[str, str]
    annotations: dict[str, str]
    job: str | None
    requests: dict[str, str]
    node: str | None = None
    bound_at: float | None = None
    phase: str = "Pending"
    finished_at: float | None = None
    deleting_at: float | None = None
    evicted: bool = False


@dataclass
class NodeState:
    at: float
    labels: dict[str, str]
    unschedulable: bool


@dataclass
class World:
    pods: dict[str, Pod] = field(default_factory=dict)
    nodes: dict[str, list[NodeState]] = field(default_factory=dict)
    events: list[tuple[float, dict]] = field(default_factory=list)
    podgroups: dict[str, dict] = field(default_factory=dict)
    jobs: dict[str, dict] = field(default_factory=dict)       # ns/name -> the vcjob object
    job_phase_at: dict[str, dict[str, float]] = field(default_factory=dict)
    deleted_by_harness: set[str] = field(default_factory=set)  # ns/name of jobs the trace deleted

    def job_phase(self, key: str) -> str | None:
        """The Volcano Job's phase (ns/name) as the watch last reported it; None before it exists."""
        return ((self.jobs.get(key) or {}).get("status") or {}).get("state", {}).get("phase")

    def node_at(self, name: str, t: float) -> NodeState | None:
        """The node as the watch last reported it at t (before its first report: that one; the
        nodes are made before a trace starts)."""
        history = self.nodes.get(name, [])
        found = history[0] if history else None
        for state in self.nodes.get(name, []):
            if state.at <= t:
                found = state
        return found


class Observer:
    def __init__(self, kube: Kube, t0: float, on_change=None):
        self.kube, self.t0 = kube, t0
        self.world = World()
        self.q: queue.Queue = queue.Queue()
        self.on_change = on_change
        self.stopping = threading.Event()
        self.lock = threading.Lock()

    def now(self) -> float:
        return time.monotonic() - self.t0

    def start(self) -> None:
        for kind, path in WATCHES.items():
            threading.Thread(target=self._watch, args=(kind, path), daemon=True, name=f"watch-{kind}").start()
        threading.Thread(target=self._apply_loop, daemon=True, name="observer").start()

    def _watch(self, kind: str, path: str) -> None:
        while not self.stopping.is_set():
            try:
                listed = self.kube.get(path)
                for item in listed.get("items", []):
                    self.q.put((self.now(), kind, "ADDED", item))
                rv = listed["metadata"]["resourceVersion"]
                while not self.stopping.is_set():
                    for ev in self.kube.watch(path, rv, timeout=300):
                        if ev["type"] == "ERROR":
                            raise ApiError(ev["object"].get("code", 500), str(ev["object"]))
                        rv = ev["object"]["metadata"]["resourceVersion"]
                        if ev["type"] != "BOOKMARK":
                            self.q.put((self.now(), kind, ev["type"], ev["object"]))
            except Exception:   # a closed or expired watch: list again (the state is idempotent)
                if not self.stopping.is_set():
                    time.sleep(0.2)

    def _apply_loop(self) -> None:
        while True:
            t, kind, typ, obj = self.q.get()
            with self.lock:
                getattr(self, f"_on_{kind}")(t, typ, obj)
                if self.on_change is not None:
                    self.on_change(t, kind, typ, obj)
            self.q.task_done()

    def settle(self, timeout: float = 5) -> None:
        """Waits until what the watches delivered so far has been applied."""
        deadline = time.monotonic() + timeout
        while self.q.unfinished_tasks and time.monotonic() < deadline:
            time.sleep(0.05)

    # -- state ----------------------------------------------------------------------------------------
    def _on_pods(self, t: float, typ: str, obj: dict) -> None:
        meta, spec, status = obj["metadata"], obj.get("spec", {}), obj.get("status", {})
        uid = meta["uid"]
        pod = self.world.pods.get(uid)
        if pod is None:
            requests: dict[str, str] = {}
            for c in spec.get("containers", []):
                requests.update((c.get("resources") or {}).get("requests") or {})
            labels = meta.get("labels") or {}
            pod = Pod(uid, meta["namespace"], meta["name"], labels, meta.get("annotations") or {},
                      labels.get("volcano.sh/job-name"), requests)
            self.world.pods[uid] = pod
        if spec.get("nodeName") and pod.node is None:
            pod.node, pod.bound_at = spec["nodeName"], t
        phase = status.get("phase", "Pending")
        if phase in ("Succeeded", "Failed") and pod.finished_at is None:
            pod.finished_at = t
        pod.phase = phase
        gone = typ == "DELETED" or meta.get("deletionTimestamp")
        if gone and pod.deleting_at is None:
            pod.deleting_at = t
            job_key = f"{pod.namespace}/{pod.job}"
            if pod.node and pod.finished_at is None and job_key not in self.world.deleted_by_harness:
                pod.evicted = True

    def _on_nodes(self, t: float, typ: str, obj: dict) -> None:
        name = obj["metadata"]["name"]
        state = NodeState(t, obj["metadata"].get("labels") or {}, bool(obj.get("spec", {}).get("unschedulable")))
        history = self.world.nodes.setdefault(name, [])
        if not history or (history[-1].labels, history[-1].unschedulable) != (state.labels, state.unschedulable):
            history.append(state)

    def _on_events(self, t: float, typ: str, obj: dict) -> None:
        if typ == "ADDED" or typ == "MODIFIED":
            self.world.events.append((t, obj))

    def _on_podgroups(self, t: float, typ: str, obj: dict) -> None:
        self.world.podgroups[f"{obj['metadata']['namespace']}/{obj['metadata']['name']}"] = obj

    def _on_jobs(self, t: float, typ: str, obj: dict) -> None:
        key = f"{obj['metadata']['namespace']}/{obj['metadata']['name']}"
        self.world.jobs[key] = obj
        phase = (obj.get("status") or {}).get("state", {}).get("phase")
        if phase:
            self.world.job_phase_at.setdefault(key, {}).setdefault(phase, t)
