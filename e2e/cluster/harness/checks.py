"""The invariants of a trace, checked as the watches report changes (continuous) and once at the
end. Each is stated from the policies in the trace file; the ones that hold for every Volcano
cluster (gangs all or nothing, no pod bound twice, every job the trace expects to finish does)
are always on. A violation is kept with the time and the objects that show it."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from .observe import Observer, Pod
from .trace import Trace, seconds, selector

# Volcano's cycles while the service is down run without it (a failed onSessionOpen leaves the
# extender's functions unregistered for the cycle, ignorable or not): what they decide is not the
# policies'. Judged from this long after the service answers again (one cycle and its binds).
DOWN_GRACE = 2.0

# A bind decided in a cycle that began before a node changed can land after the change: the
# change is judged from this long after it (Volcano's schedule period is 1 s, plus its bind).
NODE_CHANGE_GRACE = 3.0


def quantity(text: str) -> float:
    """A Kubernetes quantity as a number of units (2, 500m, 1Gi, 8)."""
    text = str(text)
    suffixes = {"m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30,
                "Ti": 2**40}
    for s in sorted(suffixes, key=len, reverse=True):
        if text.endswith(s):
            return float(text[: -len(s)]) * suffixes[s]
    return float(text)


@dataclass
class Finding:
    check: str
    at: float
    message: str


@dataclass
class Checks:
    trace: Trace
    observer: Observer
    findings: list[Finding] = field(default_factory=list)
    counted: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    short_gangs: dict[str, float] = field(default_factory=dict)   # job -> since when it is short
    reported_gangs: set[str] = field(default_factory=set)          # each short gang is reported once
    down_windows: list[list[float]] = field(default_factory=list)  # [down, up again]: the service restarted
    unjudged: list[Finding] = field(default_factory=list)   # violations while the service was down

    def __post_init__(self) -> None:
        inv = self.trace.invariants
        self.never_bound = [(r.get("name", f"never_bound[{i}]"), selector(r.get("pods")), selector(r.get("nodes")),
                             bool(r.get("unschedulable", False)),
                             seconds(r.get("from", 0), "never_bound.from"),
                             seconds(r.get("until", "100000s"), "never_bound.until"))
                            for i, r in enumerate(inv.get("never_bound", []))]
        self.never_evicted = [(r.get("name", f"never_evicted[{i}]"), selector(r.get("pods")))
                              for i, r in enumerate(inv.get("never_evicted", []))]
        self.queue_caps = inv.get("queue_cap", [])
        self.max_per_node = [(r.get("name", f"max_per_node[{i}]"), selector(r.get("pods")), int(r["max"]))
                             for i, r in enumerate(inv.get("max_per_node", []))]
        self.min_available = {f"{j.namespace}/{j.name}": j.min_available for j in self.trace.jobs}
        self.queue_of = {f"{j.namespace}/{j.name}": j.queue for j in self.trace.jobs}

    def fail(self, check: str, at: float, message: str) -> None:
        if any(a <= at <= b + DOWN_GRACE for a, b in self.down_windows):
            self.unjudged.append(Finding(check, at, message + " (while the service was down)"))
        else:
            self.findings.append(Finding(check, at, message))

    # -- continuous -------------------------------------------------------------------------------------
    def on_change(self, t: float, kind: str, typ: str, obj: dict) -> None:
        if kind != "pods":
            return
        pod = self.observer.world.pods.get(obj["metadata"]["uid"])
        if pod is None:
            return
        if pod.bound_at == t:
            self._on_bind(pod, t)
        if pod.evicted and pod.deleting_at == t:
            self.counted["evictions"] += 1
            for name, pods in self.never_evicted:
                self.counted[f"checked never_evicted {name}"] += 1
                if pods(pod.labels | _annotation_labels(pod)):
                    self.fail("never_evicted", t, f"{name}: {pod.namespace}/{pod.name} evicted from {pod.node}")

    def _on_bind(self, pod: Pod, t: float) -> None:
        world = self.observer.world
        self.counted["binds"] += 1
        now = world.node_at(pod.node or "", t)
        before = world.node_at(pod.node or "", t - NODE_CHANGE_GRACE)
        for name, pods, nodes, unschedulable, start, until in self.never_bound:
            if not start <= t <= until or not pods(pod.labels | _annotation_labels(pod)):
                continue
            self.counted[f"checked never_bound {name}"] += 1

            def rejects(state):
                return state is not None and nodes(state.labels) and (state.unschedulable or not unschedulable)
            if now is not None and rejects(now) and rejects(before):
                self.fail("never_bound", t, f"{name}: {pod.namespace}/{pod.name} bound to {pod.node}"
                          f" (labels {now.labels}, unschedulable {now.unschedulable})")
        for cap in self.queue_caps:
            if self.queue_of.get(f"{pod.namespace}/{pod.job}") != cap["queue"]:
                continue
            held = sum(quantity(p.requests.get(cap["resource"], "0")) for p in world.pods.values()
                       if p.node and p.finished_at is None and p.deleting_at is None
                       and self.queue_of.get(f"{p.namespace}/{p.job}") == cap["queue"])
            self.counted[f"checked queue_cap {cap['queue']}"] += 1
            if held > float(cap["max"]):
                self.fail("queue_cap", t, f"queue {cap['queue']} holds {held:g} {cap['resource']} after binding "
                          f"{pod.namespace}/{pod.name}, more than {cap['max']}")
        for name, pods, most in self.max_per_node:
            if not pods(pod.labels):
                continue
            same = [p for p in world.pods.values() if p.node == pod.node and p.job == pod.job
                    and p.namespace == pod.namespace and p.deleting_at is None]
            self.counted[f"checked max_per_node {name}"] += 1
            if len(same) > most:
                self.fail("max_per_node", t, f"{name}: job {pod.job} has {len(same)} pods on {pod.node}, at most {most}")
        # no pod bound twice: one Scheduled event per pod is checked at the end; a second node here
        # would be a changed spec.nodeName, which the API server refuses

    def tick(self, t: float) -> None:
        """Gangs all or nothing: a job with fewer than minAvailable of its pods ever bound, but
        some, for longer than the trace's settle time."""
        bound: dict[str, set[str]] = defaultdict(set)
        first: dict[str, float] = {}
        for p in self.observer.world.pods.values():
            if p.node and p.job:
                key = f"{p.namespace}/{p.job}"
                bound[key].add(p.uid)
                first[key] = min(first.get(key, t), p.bound_at if p.bound_at is not None else t)
        for job, uids in bound.items():
            need = self.min_available.get(job)
            if need is None or len(uids) >= need:
                self.short_gangs.pop(job, None)
                continue
            since = self.short_gangs.setdefault(job, first[job])
            if t - since > self.trace.settle and job not in self.reported_gangs:
                self.reported_gangs.add(job)
                self.fail("gang", t, f"job {job} has {len(uids)} of its {need} minAvailable pods bound "
                          f"for {t - since:.0f}s")

    # -- at the end -----------------------------------------------------------------------------------------
    def finish(self, t: float) -> None:
        world = self.observer.world
        self.tick(t)
        scheduled: dict[str, int] = defaultdict(int)
        for _, ev in world.events:
            if ev.get("reason") == "Scheduled" and ev.get("involvedObject", {}).get("kind") == "Pod":
                scheduled[ev["involvedObject"].get("uid", "")] += max(1, int(ev.get("count") or 1))
        for uid, n in scheduled.items():
            if n > 1 and uid in world.pods:
                p = world.pods[uid]
                self.fail("bound_once", t, f"{p.namespace}/{p.name} was bound {n} times")
        for job in self.trace.jobs:
            key = f"{job.namespace}/{job.name}"
            phase = world.job_phase(key)
            bound = [p for p in world.pods.values() if p.job == job.name and p.namespace == job.namespace and p.node]
            if job.expect == "finishes" and phase != "Completed":
                self.fail("finishes", t, f"job {key} is {phase or 'not created'}, expected Completed "
                          f"({len(bound)} pods bound)")
            if job.expect == "pending" and bound:
                first = min(p.bound_at or t for p in bound)
                self.fail("pending", first, f"job {key} was expected to stay pending, {len(bound)} pods were bound "
                          f"({', '.join(sorted({p.node or '' for p in bound}))})")
        for rule in self.trace.invariants.get("evicted", []):
            sel = selector(rule.get("pods"))
            n = sum(1 for p in world.pods.values() if p.evicted and sel(p.labels | _annotation_labels(p)))
            if n < int(rule.get("min", 1)):
                self.fail("evicted", t, f"{rule.get('name', 'evicted')}: {n} pods matching {rule.get('pods')!r} "
                          f"were evicted, expected at least {rule.get('min', 1)}")
        for rule in self.trace.invariants.get("reasons", []):
            self._reason(rule, t)

    def _reason(self, rule: dict, t: float) -> None:
        world = self.observer.world
        ns, _, job = rule["job"].rpartition("/")
        ns = ns or "default"
        seen = []
        for _, ev in world.events:
            obj = ev.get("involvedObject", {})
            if obj.get("namespace") != ns:
                continue
            name = obj.get("name", "")
            if (obj.get("kind") == "Pod" and name.startswith(job + "-")) or \
                    (obj.get("kind") == "PodGroup" and name.startswith(job + "-")):
                if ev.get("reason") in ("FailedScheduling", "Unschedulable"):
                    seen.append(ev.get("message", ""))
        for key, pg in world.podgroups.items():
            if key.startswith(f"{ns}/{job}-"):
                seen += [c.get("message", "") for c in (pg.get("status") or {}).get("conditions") or []]
        if not any(rule["contains"] in m for m in seen):
            shown = "; ".join(sorted(set(seen))[:4]) or "none"
            self.fail("reasons", t, f"job {ns}/{job}: no FailedScheduling or PodGroup message contains "
                      f"{rule['contains']!r}; the cluster shows: {shown}")
        else:
            self.counted[f"checked reasons {rule['job']}"] += 1


def _annotation_labels(pod: Pod) -> dict[str, str]:
    """Annotations may be selected too, under 'annotation:KEY' (a protected pod is annotated)."""
    return {f"annotation:{k}": v for k, v in pod.annotations.items()}
