"""Runs one data-table case: compile the policy, decode the wire-shaped input through
``policy_extender.wire`` and ask the PolicySet, or compare the exact rendered error (or, for a
case with ``warning:``, the exact rendered warnings of a set that compiles)."""

from __future__ import annotations

import copy
import dataclasses
import json
import tempfile
import time
from pathlib import Path

import msgspec
import yaml

from policy_extender.commands.check import check_set
from policy_extender.decide.table import DECIDING
from policy_extender.decide.table import VERBS as TABLE
from policy_extender.errors import PolicyError
from policy_extender.lang import budget
from policy_extender.policyset import compile_sources
from policy_extender.wire import decode
from policy_extender.wire.session_views import NO_SESSION, PlacedTask, SnapshotEnv

CASES = Path(__file__).parent / "cases"

#: Wire-shaped defaults (Go field names, milli units) merged under each case's input.
TASK = {"UID": "t-1", "Job": "job-1", "Name": "web-0", "Namespace": "default", "NodeName": "", "Status": 1,
        "Priority": 0, "Resreq": {"MilliCPU": 1000, "Memory": 1073741824, "ScalarResources": None},
        "Pod": {"metadata": {"labels": {}, "annotations": {}}, "spec": {"tolerations": []}}}
NODE = {"Name": "node-a", "Node": {"metadata": {"labels": {}}, "spec": {"taints": []}},
        "State": {"Phase": 1, "Reason": ""},
        "Idle": {"MilliCPU": 8000, "Memory": 34359738368, "ScalarResources": {"nvidia.com/gpu": 4000, "pods": 110}},
        "Allocatable": {"MilliCPU": 8000, "Memory": 34359738368, "ScalarResources": {"nvidia.com/gpu": 8000, "pods": 110}},
        "Used": {"MilliCPU": 0, "Memory": 0, "ScalarResources": {"nvidia.com/gpu": 4000}}, "Tasks": {}}
JOB = {"UID": "job-1", "Name": "train", "Namespace": "default", "Queue": "q-1", "Priority": 0,
       "MinAvailable": 2, "Tasks": {}, "TotalRequest": {"MilliCPU": 0, "Memory": 0, "ScalarResources": None}}
QUEUE = {"UID": "q-1", "Name": "research", "Weight": 1,
         "Queue": {"metadata": {"name": "research"}, "spec": {}, "status": {"allocated": {}}}}


def load_cases() -> list[dict]:
    cases = []
    for path in sorted(CASES.glob("*.yaml")):
        for i, case in enumerate(yaml.safe_load(path.read_text()) or []):
            case.setdefault("name", f"{i}")
            case["id"] = f"{path.stem}:{case['name']}"
            cases.append(case)
    return cases


def merged(default: dict, override: dict | None) -> dict:
    out = copy.deepcopy(default)
    for key, value in (override or {}).items():
        out[key] = merged(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def policy_of(case: dict) -> dict[str, str]:
    if "expr" in case:
        return {"case.policy": f"let shown = {case['expr']}\nfilter show: false\n    reason \"{{shown}}\"\n"}
    if "policy" in case:  # ``repeat: N`` stands for the policy text written N times over
        return {case.get("file", "case.policy"): case["policy"] * case.get("repeat", 1)}
    return case["policies"]


def env_of(case: dict, reads) -> object:
    session = case.get("session")
    if session is None:
        return NO_SESSION
    jobs = {j["UID"]: _view(decode.decode_job, "job", merged(JOB, j), reads) for j in session.get("jobs", [])}
    queues = {q["Name"]: _view(decode.decode_queue, "queue", merged(QUEUE, q), reads) for q in session.get("queues", [])}
    def listed(key):
        return [PlacedTask(a["task"], a["job"], a["queue"], a["node"], a.get("resources", {}))
                for a in session.get(key, [])]
    return SnapshotEnv(jobs, queues, listed("allocations"), listed("evictions"))


def _view(decoder, key: str, value: dict, reads):
    return getattr(decoder(json.dumps({key: value}).encode(), reads), key)


def decide(case: dict):
    """The decision (or rendered error text) the case describes."""
    if "directories" in case:
        return checked(case["directories"])
    try:
        policy_set = compile_sources(policy_of(case))
    except PolicyError as err:
        return {"error": err.render()}
    if "warning" in case:
        warned = list(policy_set.warnings)
        if "scheduler_conf" in case:  # check --scheduler-conf: what the conf's tiers do to victim rules
            from policy_extender import lang
            from policy_extender.lang import tiers
            warned += tiers.warnings(lang.compile(policy_of(case)).rules, yaml.safe_load(case["scheduler_conf"]),
                                     "volcano-scheduler.conf")
        return {"warning": PolicyError(warned, policy_set.sources).render()}
    env = env_of(case, policy_set.reads)
    verb = case.get("verb", "predicate")
    given = case.get("input", {})
    if case.get("timeout_passed"):  # a call whose scheduler stopped waiting 1 s ago (lang/budget.py)
        previous = budget.begin(time.monotonic() - 1.0, 1.0)
        try:
            return VERBS[verb](policy_set, given, env)
        finally:
            budget.end(previous)
    return VERBS[verb](policy_set, given, env)


def checked(directories: dict[str, dict[str, str | bytes]]) -> dict:
    """``policy-extender check`` on policy directories ({directory: {file: text or bytes}}),
    written to a temporary directory: its diagnostics as ``CODE: message``, the temporary
    directory shown as ``<dir>``."""
    with tempfile.TemporaryDirectory() as root:
        paths = []
        for directory, files in directories.items():
            path = Path(root, directory)
            path.mkdir()
            for name, text in files.items():
                (path / name).write_bytes(text if isinstance(text, bytes) else text.encode())
            paths.append(path)
        report = check_set(tuple(paths))
        lines = [f"{d['code']}: {d['message']}" for d in report["diagnostics"]]
        return {"error": "\n".join(lines).replace(root, "<dir>")}


def _body(**parts) -> bytes:
    return json.dumps(parts).encode()


#: Each input of a verb (its table entry's ``inputs``) -> its wire default; inputs in ``LISTS``
#: are lists of them (one default element when the case gives none).
DEFAULTS = {"task": TASK, "evictor": TASK, "evictees": TASK, "node": NODE, "nodes": NODE, "job": JOB, "queue": QUEUE}
LISTS = {"nodes", "evictees"}


def _deciding(verb: str):
    """A deciding verb of the table on a case: its inputs merged over the defaults, decoded and
    decided by the verb's entry; the decision's fields (a case's ``want:`` names some)."""
    entry = TABLE[verb]

    def decided(ps, given, env):
        parts = {name: [merged(DEFAULTS[name], item) for item in given.get(name, [{}])] if name in LISTS
                 else merged(DEFAULTS[name], given.get(name)) for name in entry.inputs}
        decision = entry.decide(ps, entry.decode(_body(**parts), ps.reads, env), env)
        if isinstance(decision, msgspec.Struct):
            return msgspec.structs.asdict(decision)
        return {f.name: getattr(decision, f.name) for f in dataclasses.fields(decision)}
    return decided


def _value(ps, given, env):
    """An ``expr`` case: the expression rendered as the reason text of a rejecting filter."""
    reason = VERBS["predicate"](ps, given, env)["reason"]
    return {"value": reason.split(": ", 1)[1]}


VERBS = {**{verb: _deciding(verb) for verb in DECIDING}, "value": _value}
