"""Recorded decisions into fixture files (``docs/testing-policies.md``), expecting the answers the
given policy set gives now — so a behaviour seen in production becomes a regression test.

Layout under OUT, per cycle::

    <cycle>.fixtures.yaml          policies: relative paths to the policy files; one case per call
    <cycle>/open.json              the cycle's onSessionOpen body (raw), the cases' session
    <cycle>/<index>-<verb>.json    each case's raw request body

A case's session is the open body plus the allocations in effect when the call was made
(allocateFunc minus deallocateFunc so far), written as compact tasks (the fixture format takes
compact allocations); the runner sends them as Volcano did.

kube-scheduler's calls (recorded in the no-session pseudo-cycles, beside Volcano's) become
``protocol: kube-scheduler`` cases: a compact ``input`` where the recorded body allows
(``kube_cases``), its ``body_file`` otherwise, expecting what kube-scheduler reads off the answer
(``fixture_runner.kube.actual``); a filter answer carrying ``Error`` makes no case.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import yaml

from policy_extender.decide.kube_table import KUBE_VERBS
from policy_extender.decide.table import DECIDING
from policy_extender.fixture_runner import kube
from policy_extender.fixture_runner.model import DECISION_ALIASES, DECISIONS
from policy_extender.fixture_runner.outcome import actual
from policy_extender.record.frames import Problem
from policy_extender.verb_names.volcano import ALLOCATE, DEALLOCATE, ON_SESSION_OPEN
from policy_extender.wire.paths import PLAIN_SCALARS

from .diff import subject_of
from .engine import Replayer
from .kube_cases import compact_input
from .reading import RecordedCall, RecordedCycle, read_cycles


@dataclass
class Written:
    files: list[str] = field(default_factory=list)
    cases: int = 0
    problems: list[Problem] = field(default_factory=list)


def write_fixtures(recording: str, policy_set: Any, policy_dir: str, out: str,
                   keyword: str | None = None, values: str | None = None) -> Written:
    """``values``: the values file of the set (``replay --values``), named by the files' ``values:``."""
    written = Written()
    replayer = Replayer(policy_set)
    policy_files = _policy_paths(policy_set, policy_dir, out, values)
    head: dict[str, Any] = {"policies": policy_files}
    if values:
        head["values"] = os.path.relpath(values, out)
    for cycle in read_cycles(recording, written.problems):
        cases = list(_cases(cycle, replayer, out, keyword))
        if cases:
            path = Path(out) / f"{cycle.name}.fixtures.yaml"
            path.write_text(yaml.safe_dump({**head, "cases": cases},
                                           sort_keys=False, allow_unicode=True), encoding="utf-8")
            written.files.append(str(path))
            written.cases += len(cases)
    return written


def _policy_paths(policy_set: Any, policy_dir: str, out: str, values: str | None = None) -> list[str]:
    """The set's files (but the values file named apart), relative to OUT, where fixture files
    resolve ``policies:``."""
    Path(out).mkdir(parents=True, exist_ok=True)
    apart = os.path.basename(values) if values else None
    return [os.path.relpath(Path(policy_dir) / name, out) for name in sorted(policy_set.sources) if name != apart]


def _cases(cycle: RecordedCycle, replayer: Replayer, out: str, keyword: str | None):
    """One case per chosen decision of the cycle, replayed to read the answer and its rule."""
    allocations: dict[str, dict] = {}
    open_file = None
    for replayed in replayer.replay(cycle):
        call = replayed.call
        if call.verb == ON_SESSION_OPEN:
            open_file = _write_body(out, cycle, "open.json", call.request)
        _track(call, allocations)
        if call.verb in KUBE_VERBS and replayed.answer.status == 200 and _chosen(call, keyword):
            case = _kube_case(replayed.index, call, replayer, replayed.answer.body, out, cycle)
            if case is not None:
                yield case
            continue
        if call.verb not in DECIDING or replayed.answer.status != 200 or not _chosen(call, keyword):
            continue
        body_file = _write_body(out, cycle, f"{replayed.index:04d}-{call.verb}.json", call.request)
        yield _case(replayed.index, call, replayer, replayed.answer.body, body_file,
                    open_file, list(allocations.values()))


def _chosen(call: RecordedCall, keyword: str | None) -> bool:
    if not keyword:
        return True
    subject = subject_of(call.verb, call.request)
    return keyword.lower() in f"{call.verb} {subject.name} {subject.node}".lower()


def _track(call: RecordedCall, allocations: dict[str, dict]) -> None:
    if call.verb not in (ALLOCATE, DEALLOCATE) or call.status != 200:
        return
    task = orjson.loads(call.request).get("task") or {}
    if call.verb == ALLOCATE:
        allocations[task.get("UID", "")] = compact_task(task)
    else:
        allocations.pop(task.get("UID", ""), None)


def compact_task(task: dict) -> dict:
    """A wire TaskInfo as the compact task ``wire.compact`` expands (what a session counts)."""
    return {"name": task.get("Name") or "task", "namespace": task.get("Namespace") or "default",
            "uid": task.get("UID", ""), "job": task.get("Job") or "",
            "node_name": task.get("NodeName") or "", "requests": whole_requests(task.get("Resreq") or {})}


def whole_requests(resource: dict) -> dict:
    """Volcano's Resource (millicores, bytes, milli scalars) in whole units."""
    amounts = {"cpu": _whole((resource.get("MilliCPU") or 0) / 1000),
               "memory": _whole(resource.get("Memory") or 0)}
    for name, value in (resource.get("ScalarResources") or {}).items():
        amounts[name] = _whole(value if name in PLAIN_SCALARS else value / 1000)
    return amounts


def _whole(value: float) -> int | float:
    return int(value) if float(value).is_integer() else value


def _write_body(out: str, cycle: RecordedCycle, name: str, body: bytes) -> str:
    directory = Path(out) / cycle.name
    directory.mkdir(parents=True, exist_ok=True)
    (directory / name).write_bytes(body)
    return f"{cycle.name}/{name}"


def _case(index: int, call: RecordedCall, replayer: Replayer, response: bytes, body_file: str,
          open_file: str | None, allocations: list[dict]) -> dict:
    name = DECISION_ALIASES.get(call.verb, call.verb)
    subject = subject_of(call.verb, call.request)
    outcome = actual(name, replayer.decision(call.verb, call.request), orjson.loads(response))
    case: dict[str, Any] = {"name": f"#{index} {call.verb} {subject.name}" + (f" on {subject.node}" if subject.node else ""),
            "note": f"recorded at {call.where}", "decision": name, "body_file": body_file}
    if open_file is not None:
        case["session"] = {"body_file": open_file, "allocations": allocations}
    case["expect"] = expectation(name, outcome)
    return case


def _kube_case(index: int, call: RecordedCall, replayer: Replayer, response: bytes, out: str,
               cycle: RecordedCycle) -> dict | None:
    """A kube-scheduler call's case, or None when the answer is an error (its filter's ``Error``)."""
    verb = KUBE_VERBS[call.verb]
    try:
        outcome = kube.actual(verb.decision, replayer.decision(call.verb, call.request), orjson.loads(response),
                              call.request)
    except kube.KubeAnswerError:
        return None
    subject = subject_of(call.verb, call.request)
    case: dict[str, Any] = {"name": f"#{index} {call.verb} {subject.name}" + (f" on {subject.node}" if subject.node else ""),
                            "note": f"recorded at {call.where}", "protocol": kube.PROTOCOL, "decision": verb.decision}
    compact = compact_input(verb, call.request)
    if compact is not None:
        case["input"] = compact
    else:
        case["body_file"] = _write_body(out, cycle, f"{index:04d}-{call.verb}.json", call.request)
    case["expect"] = kube_expectation(verb.decision, outcome)
    return case


def kube_expectation(name: str, outcome: dict) -> dict:
    """A kube-scheduler case's ``expect:``: a filter's per node when its body sends several (the
    outcome has no one node's ``fits``), scores without their order (ties), victims by name."""
    if name == "preemptable":
        return {"victims": outcome["victims"]}
    if name == "score":
        return {"scores": outcome["scores"]}
    if "fits" not in outcome:
        return {"nodes": {node: _kube_node_expect(each) for node, each in outcome["nodes"].items()}}
    return _kube_node_expect(outcome)


def _kube_node_expect(outcome: dict) -> dict:
    if outcome["fits"]:
        return {"fits": True}
    expect = {"fits": False, "unresolvable": outcome["unresolvable"], "rule": outcome["rule"]}
    if outcome["reason"]:
        expect["reason"] = "^" + re.escape(outcome["reason"]) + "$"
    return _without_none(expect)


def expectation(name: str, outcome: dict) -> dict:
    """The ``expect:`` of a case from the outcome the runner reads (fixtures.outcome.actual):
    every outcome the decision's ``expect:`` takes, reasons as exact (escaped) regexes."""
    if name == "filter" and outcome["fits"]:
        return {"fits": True}
    allowed = DECISIONS[name].expect_keys - {"order"}  # scores say it; ties make order ambiguous
    expect = {key: value for key, value in outcome.items() if key in allowed}
    if expect.get("reason"):
        expect["reason"] = "^" + re.escape(expect["reason"]) + "$"
    return _without_none({key: value for key, value in expect.items() if value != ""})


def _without_none(expect: dict) -> dict:
    return {key: value for key, value in expect.items() if value is not None}
