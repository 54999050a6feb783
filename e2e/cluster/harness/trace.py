"""A workload trace: nodes, queues, priority classes, Volcano jobs arriving over time, events
mid-run, and the invariants that must hold, stated from the policies (docs/e2e-cluster.md has
the format). Loaded strictly: an unknown key is an error that names the closest known one."""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

DURATION = re.compile(r"^(\d+(?:\.\d+)?)(ms|s|m)$")


class TraceError(Exception):
    pass


def seconds(value: Any, where: str) -> float:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    m = DURATION.match(str(value))
    if not m:
        raise TraceError(f"{where}: {value!r} is not a duration (30s, 2m, 500ms)")
    return float(m.group(1)) * {"ms": 0.001, "s": 1, "m": 60}[m.group(2)]


def _keys(obj: Any, allowed: set[str], where: str, required: tuple[str, ...] = ()) -> dict:
    if not isinstance(obj, dict):
        raise TraceError(f"{where}: expected a mapping, got {type(obj).__name__}")
    for key in obj:
        if key not in allowed:
            close = difflib.get_close_matches(str(key), sorted(allowed), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else f"; known: {', '.join(sorted(allowed))}"
            raise TraceError(f"{where}: unknown key {key!r}{hint}")
    for key in required:
        if key not in obj:
            raise TraceError(f"{where}: {key!r} is required")
    return obj


@dataclass
class Task:
    name: str
    replicas: int
    requests: dict[str, str]
    duration: float
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)


@dataclass
class Job:
    name: str
    at: float
    namespace: str
    queue: str
    min_available: int
    priority_class: str | None
    tasks: list[Task]
    expect: str              # finishes | pending | any
    labels: dict[str, str] = field(default_factory=dict)


@dataclass
class Event:
    at: float
    kind: str
    arg: Any
    where: str


EVENT_KINDS = ("apply-policies", "break-policy", "kill-worker", "restart-service", "cordon", "uncordon",
               "label", "scheduler-conf", "delete-job")
INVARIANTS = ("never_bound", "never_evicted", "evicted", "queue_cap", "max_per_node", "reasons", "why")


@dataclass
class Trace:
    path: Path
    name: str
    description: str
    duration: float
    settle: float
    policies: Path | None
    values: Path | None
    nodes: list[dict]
    queues: list[dict]
    priority_classes: list[dict]
    jobs: list[Job]
    events: list[Event]
    invariants: dict[str, list[dict]]


def load(path: Path) -> Trace:
    try:
        raw = yaml.safe_load(path.read_text())
    except yaml.YAMLError as e:
        raise TraceError(f"{path}: not YAML: {e}") from None
    top = _keys(raw, {"description", "duration", "settle", "policies", "values", "nodes", "queues",
                      "priorityClasses", "jobs", "events", "invariants"}, str(path), ("nodes", "jobs", "duration"))
    base = path.parent

    def rel(p: str | None) -> Path | None:
        return None if p is None else (base / p).resolve()

    nodes = []
    for i, n in enumerate(top["nodes"]):
        w = f"{path.name}: nodes[{i}]"
        _keys(n, {"name", "count", "labels", "capacity", "taints"}, w, ("name", "capacity"))
        count = int(n.get("count", 1))
        for k in range(count):
            nodes.append({"name": n["name"] if count == 1 and "count" not in n else f"{n['name']}-{k}",
                          "labels": {str(a): str(b) for a, b in (n.get("labels") or {}).items()},
                          "capacity": {str(a): str(b) for a, b in n["capacity"].items()},
                          "taints": n.get("taints") or []})
    queues = []
    for i, q in enumerate(top.get("queues") or []):
        _keys(q, {"name", "weight", "capability", "reclaimable"}, f"{path.name}: queues[{i}]", ("name",))
        queues.append(q)
    pcs = []
    for i, pc in enumerate(top.get("priorityClasses") or []):
        _keys(pc, {"name", "value"}, f"{path.name}: priorityClasses[{i}]", ("name", "value"))
        pcs.append(pc)
    jobs = []
    for i, j in enumerate(top["jobs"]):
        w = f"{path.name}: jobs[{i}]"
        _keys(j, {"name", "at", "namespace", "queue", "minAvailable", "priorityClassName", "duration",
                  "tasks", "expect", "labels", "count"}, w, ("name", "tasks"))
        tasks = []
        for k, t in enumerate(j["tasks"]):
            tw = f"{w}.tasks[{k}]"
            _keys(t, {"name", "replicas", "requests", "duration", "labels", "annotations"}, tw, ("name",))
            tasks.append(Task(t["name"], int(t.get("replicas", 1)),
                              {str(a): str(b) for a, b in (t.get("requests") or {"cpu": "1"}).items()},
                              seconds(t.get("duration", j.get("duration", "20s")), tw),
                              {str(a): str(b) for a, b in (t.get("labels") or {}).items()},
                              {str(a): str(b) for a, b in (t.get("annotations") or {}).items()}))
        expect = j.get("expect", "finishes")
        if expect not in ("finishes", "pending", "any"):
            raise TraceError(f"{w}: expect is finishes, pending or any, not {expect!r}")
        count = int(j.get("count", 1))
        for c in range(count):
            jobs.append(Job(j["name"] if count == 1 else f"{j['name']}-{c}",
                            seconds(j.get("at", 0), w), j.get("namespace", "default"),
                            j.get("queue", "default"),
                            int(j.get("minAvailable", sum(t.replicas for t in tasks))),
                            j.get("priorityClassName"), tasks, expect,
                            {str(a): str(b) for a, b in (j.get("labels") or {}).items()}))
    events = []
    for i, ev in enumerate(top.get("events") or []):
        w = f"{path.name}: events[{i}]"
        _keys(ev, {"at", *EVENT_KINDS}, w, ("at",))
        kinds = [k for k in ev if k != "at"]
        if len(kinds) != 1:
            raise TraceError(f"{w}: one of {', '.join(EVENT_KINDS)} per event, got {kinds or 'none'}")
        arg = ev[kinds[0]]
        if kinds[0] == "apply-policies":
            _keys(arg, {"from", "add", "remove"}, f"{w}.apply-policies", ("from",))
            arg = {**arg, "from": rel(arg["from"])}
        if kinds[0] == "label":
            _keys(arg, {"node", "labels"}, f"{w}.label", ("node", "labels"))
        if kinds[0] == "break-policy":
            _keys(arg, {"file", "text"}, f"{w}.break-policy", ("file", "text"))
        if kinds[0] == "scheduler-conf":
            _keys(arg, {"from", "replace"}, f"{w}.scheduler-conf", ("from",))
            arg = {**arg, "from": rel(arg["from"])}
        events.append(Event(seconds(ev["at"], w), kinds[0], arg, w))
    inv = _keys(top.get("invariants") or {}, set(INVARIANTS), f"{path.name}: invariants")
    return Trace(path, path.stem.removesuffix(".trace"), str(top.get("description", "")).strip(),
                 seconds(top["duration"], f"{path.name}: duration"), seconds(top.get("settle", "10s"), "settle"),
                 rel(top.get("policies")), rel(top.get("values")), nodes, queues, pcs,
                 sorted(jobs, key=lambda j: j.at), sorted(events, key=lambda e: e.at),
                 {k: list(v) for k, v in inv.items()})


# -- label selectors, as kubectl -l writes them ------------------------------------------------------
_TERM = re.compile(r"\s*(!?)([\w./:-]+)\s*(?:(==|=|!=)\s*([\w./-]*)|(in|notin)\s*\(([^)]*)\))?\s*")


def selector(text: str | None):
    """A predicate over a labels dict from a label selector (k=v, k!=v, k in (a,b), k notin (a,b),
    k, !k; comma-separated terms all hold). None or '' selects everything."""
    terms = []
    rest = (text or "").strip()
    while rest:
        m = _TERM.match(rest)
        if not m or not m.group(0).strip():
            raise TraceError(f"label selector {text!r}: cannot read {rest!r}")
        terms.append(m.groups())
        rest = rest[m.end():]
        if rest.startswith(","):
            rest = rest[1:]
        elif rest:
            raise TraceError(f"label selector {text!r}: expected ',' before {rest!r}")

    def match(labels: dict[str, str]) -> bool:
        for neg, key, op, value, setop, values in terms:
            have = labels.get(key)
            if setop:
                vals = {v.strip() for v in values.split(",")}
                ok = (have in vals) if setop == "in" else (have is None or have not in vals)
            elif op in ("=", "=="):
                ok = have == value
            elif op == "!=":
                ok = have != value
            else:
                ok = (have is None) if neg else (have is not None)
            if not ok:
                return False
        return True
    return match
