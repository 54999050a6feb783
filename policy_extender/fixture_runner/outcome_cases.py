"""Outcome cases: what Volcano's own scheduler does with a cluster, not only what the service
answers to one call. A case with ``cluster:`` is one; it runs through the outcome engine
(``engine``: Volcano's real actions and plugins, its conf loader, a real ``policy-extender
serve``) and its ``expect:`` holds the outcome: binds, evictions, never-evicted pods, pipelined
tasks, PodGroup phases, what ``policy-extender why`` says, calls per verb.

The format is the one of the e2e suite's scenarios (``e2e/volcano/scenario.go`` decodes what
this module writes; ``e2e/volcano/cases/*.fixtures.yaml`` are the suite's own cases)::

    - name: a protected pod survives reclaim
      volcano: v1.15.1            # default: --volcano, else the newest supported
      conf: ../docker/k8s/sidecar/volcano-scheduler.conf   # default: scheduler_conf: of the file, --scheduler-conf
      actions: "enqueue, allocate, preempt, reclaim"       # replaces the conf's actions
      cluster: {priorityClasses: {...}, queues: [...], nodes: [...], nodeSets: [...], jobs: [...]}
      expect: {binds: {...}, evictions: [...], never_evicted: [...], pipelined: {...}, phases: {...}, why: {...}}

Several cycles against the same serve (the cluster evolving between them: e2e/volcano/cycles.go)::

      cycles: 3
      evictionGrace: 1           # cycles an evicted pod stays terminating
      events: [{before: 2, addJobs: [...], addNodes: [...], removeNodes: [n2], cordon: [n1], uncordon: [...], deletePods: [...]}]
      expect: {cycle: {2: {binds: {}}}, bound_by: {ns/pod: 3}, never_bound: [ns/pod], ...}

A job with ``pods: after-enqueue`` is a Volcano Job as submitted: its PodGroup Pending, its pods
created (in the next cycle's cache) only once a cycle has enqueued it, as its controller does.

This module only checks a case's shape (every key known, with ``did you mean`` and
``file:line:col``) and turns it into the engine's scenario; ``outcome_run`` runs and compares.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .model import FixtureError
from .positioned_yaml import Mark, PosDict

# --- the schema: a mapping of key -> kind; kinds are "str", "int", "bool", "quantity" (a string
# or number), ("map", kind), ("list", kind), or a nested schema (a dict). It mirrors the json
# tags of e2e/volcano/scenario.go; tests/fixture_runner check the two agree.
QUANTITIES = ("map", "quantity")
LABELS = ("map", "str")
TAINT = {"key": "str", "value": "str", "effect": "str"}
NODE = {"name": "str", "labels": LABELS, "allocatable": QUANTITIES, "taints": ("list", TAINT), "unschedulable": "bool"}
NODE_SET = {**NODE, "count": "int"}
QUEUE = {"name": "str", "weight": "int", "capability": QUANTITIES, "reclaimable": "bool"}
TASK = {"name": "str", "replicas": "int", "requests": QUANTITIES, "annotations": LABELS,
        "replicaAnnotations": ("list", LABELS), "labels": LABELS, "tolerations": ("list", TAINT),
        "nodes": ("list", "str"), "duration": "int"}
JOB = {"name": "str", "namespace": "str", "queue": "str", "minMember": "int", "minResources": QUANTITIES,
       "phase": "str", "priorityClass": "str", "pods": "str", "tasks": ("list", TASK)}
#: When a job's pods exist (``pods:``): from the start, or once a cycle has enqueued the PodGroup
#: (a Volcano Job: its controller creates them then; e2e/volcano/cluster.go, cycles.go).
PODS = {"present": "the default: the pods exist from the start, whatever the PodGroup's phase",
        "after-enqueue": "a Volcano Job: its controller creates the pods once a cycle has enqueued the PodGroup"}
CLUSTER = {"priorityClasses": ("map", "int"), "queues": ("list", QUEUE), "nodes": ("list", NODE),
           "nodeSets": ("list", NODE_SET), "jobs": ("list", JOB)}
CALLS = ("map", {"min": "int", "max": "int"})
#: What one cycle did (``expect:`` of a case of one cycle, ``expect.cycle.N`` of several).
EXPECT_CYCLE = {"binds": LABELS, "evictions": ("list", "str"), "never_evicted": ("list", "str"),
                "pipelined": LABELS, "phases": LABELS, "calls": CALLS, "why": ("map", ("list", "str")),
                "panic": "str"}
#: ... and over a run of several cycles.
EXPECT_ONE = {**EXPECT_CYCLE, "cycle": ("map", EXPECT_CYCLE), "bound_by": ("map", "int"),
              "never_bound": ("list", "str")}
EXPECT = {**EXPECT_ONE, "releases": ("map", EXPECT_ONE)}
#: What happens to the cluster before cycle ``before`` (2 to ``cycles``).
EVENT = {"before": "int", "addJobs": ("list", JOB), "addNodes": ("list", NODE), "removeNodes": ("list", "str"),
         "cordon": ("list", "str"), "uncordon": ("list", "str"), "deletePods": ("list", "str")}
FAULT = {"stop": {"verb": "str", "count": "int"}, "delay": LABELS, "fail": ("map", "int")}
#: The keys of an outcome case (beside ``name`` and ``note``), and what each holds.
CASE = {"cluster": CLUSTER, "volcano": "str", "conf": "str", "actions": "str", "expect": EXPECT,
        "extender": ("map", "any"), "configurations": ("map", ("map", "any")), "serve": ("list", "str"),
        "fault": FAULT, "since": "str", "before": "str", "policies": LABELS, "policyFiles": ("list", "str"),
        "description": "str", "cycles": "int", "evictionGrace": "int", "events": ("list", EVENT)}
#: The keys that make a case of several cycles (passed to the engine as written).
CYCLE_KEYS = ("cycles", "evictionGrace", "events")
OUTCOME_KEYS = frozenset(CASE)
#: Expectations the engine's report answers, and what each means (docs/testing-policies.md).
EXPECT_KEYS = tuple(EXPECT)
POD_PHASES = ("Pending", "Inqueue", "Running", "Unknown", "Completed")


@dataclass(frozen=True)
class OutcomeSpec:
    """An outcome case, checked: the scenario for the engine, and where things are in the file."""

    cluster: dict
    expect: dict
    conf: Path | None = None              # None: the file's scheduler_conf, --scheduler-conf, or the shipped one
    release: str | None = None            # None: --volcano, else the newest supported
    extra: dict = field(default_factory=dict)      # actions, extender, configurations, serve, fault
    since: str | None = None
    before: str | None = None
    policy_texts: dict | None = None      # inline policies (name -> text) replacing the file's set
    marks: dict = field(default_factory=dict)      # expect key (and "ns/pod" keys) -> Mark

    def expect_for(self, release: str) -> dict:
        """``expect`` with ``releases:`` applied: the entries whose key starts ``release``."""
        out = {k: v for k, v in self.expect.items() if k != "releases"}
        for prefix, replacement in (self.expect.get("releases") or {}).items():
            if release.startswith(prefix):
                out.update(replacement)
        return out

    def applies_to(self, release: str) -> bool:
        return (self.since is None or _version(release) >= _version(self.since)) and \
            (self.before is None or _version(release) < _version(self.before))

    def scenario(self, policies: dict[str, str], conf: Path, why_names, cycle_why=None) -> dict:
        """The engine's scenario (the json of e2e/volcano/scenario.go's Scenario). Its expect holds
        only the names to ask ``why`` about, after the run and after cycle N (``cycle_why``)."""
        expect: dict[str, Any] = {"why": {name: [] for name in why_names}}
        if cycle_why:
            expect["cycle"] = {str(n): {"why": {name: [] for name in names}} for n, names in cycle_why.items()}
        scenario: dict[str, Any] = {"policies": policies, "conf": str(conf.resolve()), "cluster": self.cluster,
                                    "expect": expect}
        scenario.update(self.extra)
        return scenario


def _version(text: str) -> tuple[int, ...]:
    parts = []
    for part in text.lstrip("v").split("-")[0].split("."):
        parts.append(int(part) if part.isdigit() else 0)
    return tuple(parts)


def is_outcome_case(raw: dict) -> bool:
    return isinstance(raw, dict) and "cluster" in raw


def build(path: Path, merged: PosDict, mark: Mark) -> OutcomeSpec:
    """The checked outcome case of ``merged`` (a case with ``cluster:``), or a FixtureError."""
    answer_keys = [k for k in ("decision", "input", "body", "body_file", "session", "protocol") if k in merged]
    if answer_keys:
        raise FixtureError(merged.mark_of(answer_keys[0]), f"`{answer_keys[0]}:` belongs to an answer case (one "
                           "call to the service); this case has `cluster:`, so it is an outcome case (Volcano's "
                           "whole cycle): drop it, or make two cases", column=True)
    for key in merged:
        if key in ("name", "note"):
            continue
        check(merged[key], CASE.get(key), key, merged.mark_of(key), OUTCOME_KEYS | {"name", "note"}, "outcome case")
    if "expect" not in merged or not merged["expect"]:
        raise FixtureError(merged.mark_of("expect") if "expect" in merged else mark,
                           f"an outcome case needs `expect:` with some of: {', '.join(EXPECT_KEYS)}", column=True)
    expect = merged["expect"]
    _check_cluster(merged["cluster"], merged.mark_of("cluster"))
    conf = None
    if "conf" in merged:
        conf = path.parent / merged["conf"]
        if not conf.is_file():
            raise FixtureError(merged.mark_of("conf"), f"scheduler conf {merged['conf']!r} not found beside this "
                               f"fixture file ({conf}); the path is relative to the fixture file", column=True)
    files = merged.get("policyFiles") or []
    texts = dict(merged.get("policies") or {}) if ("policies" in merged or files) else None
    for index, name in enumerate(files):
        file = path.parent / name
        if not file.is_file():
            raise FixtureError(merged["policyFiles"].mark_of(index), f"policy file {name!r} not found beside this "
                               f"fixture file ({file})", column=True)
        texts[Path(name).name] = file.read_text(encoding="utf-8")  # type: ignore[index]  # set when files are
    _check_cycles(merged, expect)
    extra = {key: _plain(merged[key]) for key in ("actions", "extender", "configurations", "serve", "fault",
                                                   *CYCLE_KEYS) if key in merged}
    marks = {key: expect.mark_of(key) for key in expect}
    return OutcomeSpec(cluster=_plain(merged["cluster"]), expect=_plain(expect), conf=conf,
                       release=merged.get("volcano"), extra=extra, since=merged.get("since"),
                       before=merged.get("before"), policy_texts=texts, marks=marks)


def _plain(value):
    """Plain dicts and lists (the positions dropped) for JSON."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def check(value, kind, key: str, mark: Mark, siblings, what: str) -> None:
    """``value`` (under ``key`` at ``mark``) against ``kind``; an unknown key (kind None) is an
    error naming the closest known one."""
    if kind is None:
        close = difflib.get_close_matches(str(key), sorted(siblings), n=1, cutoff=0.6)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise FixtureError(mark, f"unknown key {key!r} in this {what}{hint}: expected one of "
                           f"{', '.join(sorted(siblings))}", column=True)
    if kind == "any":
        return
    if isinstance(kind, dict):
        if not isinstance(value, dict):
            raise FixtureError(mark, f"`{key}:` is a mapping with some of {', '.join(kind)}", column=True)
        _duplicates(value, key)
        for child, child_value in value.items():
            check(child_value, kind.get(child), child, _mark(value, child, mark), kind, f"`{key}` mapping")
        return
    if isinstance(kind, tuple):
        container, item = kind
        if container == "list":
            if not isinstance(value, list):
                raise FixtureError(mark, f"`{key}:` is a list", column=True)
            for index, each in enumerate(value):
                where = value.mark_of(index) if hasattr(value, "mark_of") else mark
                check(each, item, f"{key}[{index}]", where, (), f"`{key}` list")
            return
        if not isinstance(value, dict):
            raise FixtureError(mark, f"`{key}:` is a mapping (name: value)", column=True)
        _duplicates(value, key)
        for child, child_value in value.items():
            check(child_value, item, f"{key}.{child}", _mark(value, child, mark), (), f"`{key}` mapping")
        return
    ok = {"str": lambda v: isinstance(v, str), "int": lambda v: isinstance(v, int) and not isinstance(v, bool),
          "bool": lambda v: isinstance(v, bool),
          "quantity": lambda v: isinstance(v, (str, int, float)) and not isinstance(v, bool)}[kind](value)
    if not ok:
        words = {"str": "a string", "int": "an integer", "bool": "true or false",
                 "quantity": 'a quantity ("8", 32Gi, 500m)'}
        raise FixtureError(mark, f"`{key}` is {words[kind]}; got {value!r}", column=True)


def _mark(mapping, key, default: Mark) -> Mark:
    return mapping.mark_of(key) if hasattr(mapping, "mark_of") else default


def _duplicates(mapping, key: str) -> None:
    for name, where in getattr(mapping, "duplicates", ()):
        raise FixtureError(where, f"key {name!r} appears twice in `{key}`: keep one", column=True)


def _check_cluster(cluster: PosDict, mark: Mark) -> None:
    """What the engine would refuse late, said early and where: a job without tasks, a priority
    class not declared, a running replica on a node that does not exist."""
    nodes = {n.get("name") for n in cluster.get("nodes") or []}
    classes = cluster.get("priorityClasses") or {}
    for job in cluster.get("jobs") or []:
        where = getattr(job, "mark", mark)
        if not job.get("name"):
            raise FixtureError(where, "a job needs a `name:` (its pods are named <job>-<task>-<index>)", column=True)
        if not job.get("tasks"):
            raise FixtureError(where, f"job {job['name']} has no `tasks:`; give it at least one "
                               "({name: worker, requests: {cpu: \"1\"}})", column=True)
        _check_pods(job, where)
        if job.get("priorityClass") and job["priorityClass"] not in classes:
            raise FixtureError(job.mark_of("priorityClass"), f"priority class {job['priorityClass']!r} is not in "
                               f"cluster.priorityClasses ({', '.join(classes) or 'none declared'})", column=True)
        for task in job["tasks"]:
            for index, node in enumerate(task.get("nodes") or []):
                if node and nodes and node not in nodes and not (cluster.get("nodeSets")):
                    raise FixtureError(task["nodes"].mark_of(index), f"replica {index} of {job['name']}-"
                                       f"{task.get('name')} runs on {node!r}, which is not a node of the cluster "
                                       f"({', '.join(sorted(nodes))})", column=True)


def _check_pods(job: PosDict, where: Mark) -> None:
    """``pods:`` is one of PODS; ``after-enqueue`` is a Volcano Job as submitted: its PodGroup
    Pending, with the minResources its controller always sets, and no pod running yet."""
    if "pods" not in job:
        return
    value, at, name = job["pods"], job.mark_of("pods"), job.get("name")
    if value not in PODS:
        close = difflib.get_close_matches(str(value), list(PODS), n=1, cutoff=0.5)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise FixtureError(at, f"job {name}: `pods: {value}` is not known{hint}: write "
                           + " or ".join(f"`{name}` ({what})" for name, what in PODS.items()), column=True)
    if value == "present":
        return
    if job.get("phase", "Pending") != "Pending":
        raise FixtureError(job.mark_of("phase"), f"job {name}: `phase: {job['phase']}` with `pods: after-enqueue`: "
                           "the controller creates the pods of a PodGroup that is not Pending at once; drop "
                           "`phase:` (a Volcano Job waits Pending) or `pods:`", column=True)
    if not job.get("minResources"):
        raise FixtureError(at, f"job {name}: `pods: after-enqueue` needs `minResources:`: Volcano's job controller "
                           "always sets them (the requests of the job's minAvailable pods), and a PodGroup without "
                           "them is enqueued without asking any plugin; write them ({nvidia.com/gpu: \"24\"})",
                           column=True)
    for task in job.get("tasks") or []:
        for index, node in enumerate(task.get("nodes") or []):
            if node:
                raise FixtureError(task["nodes"].mark_of(index), f"job {name}: replica {index} of task "
                                   f"{task.get('name')} runs on {node!r}, but with `pods: after-enqueue` no pod "
                                   "exists before the PodGroup is enqueued; drop `nodes:` or `pods:`", column=True)


def _check_cycles(merged: PosDict, expect: PosDict) -> None:
    """A case of several cycles: the cycle numbers its events and expectations name exist, the
    jobs its events add have tasks."""
    cycles = merged.get("cycles", 1)
    if cycles < 1:
        raise FixtureError(merged.mark_of("cycles"), f"`cycles: {cycles}`: a case runs 1 cycle or more", column=True)
    if merged.get("evictionGrace", 0) < 0:
        raise FixtureError(merged.mark_of("evictionGrace"), f"`evictionGrace: {merged['evictionGrace']}`: an "
                           "evicted pod stays 0 cycles or more (default 1)", column=True)
    for index, event in enumerate(merged.get("events") or []):
        where = merged["events"].mark_of(index)
        before = event.get("before")
        if before is None or not 2 <= before <= cycles:
            raise FixtureError(event.mark_of("before") if "before" in event else where,
                               f"events[{index}]: `before:` is the cycle the event happens before, 2 to {cycles} "
                               f"(cycles: {cycles}); got {before!r}", column=True)
        for job in event.get("addJobs") or []:
            if not job.get("name") or not job.get("tasks"):
                raise FixtureError(getattr(job, "mark", where), f"events[{index}].addJobs: a job needs a `name:` "
                                   "and `tasks:` ({name: worker, requests: {cpu: \"1\"}})", column=True)
            _check_pods(job, getattr(job, "mark", where))
    for scope in [expect, *(expect.get("releases") or {}).values()]:
        for n in scope.get("cycle") or {}:
            if not isinstance(n, int) or not 1 <= n <= cycles:
                raise FixtureError(scope["cycle"].mark_of(n), f"expect.cycle.{n}: the case runs cycles 1 to {cycles} "
                                   f"(cycles: {cycles}); write a cycle number in that range", column=True)
        for pod, n in (scope.get("bound_by") or {}).items():
            if not 1 <= n <= cycles:
                raise FixtureError(scope["bound_by"].mark_of(pod), f"expect.bound_by.{pod}: {n}: the case runs "
                                   f"cycles 1 to {cycles}", column=True)
