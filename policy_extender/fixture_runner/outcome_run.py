"""Running an outcome case: its cluster, policies and scheduler conf through the outcome engine
(Volcano's own scheduler against a real ``policy-extender serve``), then its ``expect:`` against
what Volcano did, with a diff and an explanation: where the service's victim answers went in
Volcano's tiers, which plugins could then decide, and what ``why`` said.

Expectations (all optional; the names of pods are ``namespace/<job>-<task>-<index>``):

* ``binds: {ns/pod: node}``: the complete list of binds of the cycle (``"*"``: any node);
* ``evictions: [ns/pod]``: the complete list of evictions;
* ``never_evicted: [ns/pod]``: pods that must not be evicted (whatever else is);
* ``pipelined: {ns/pod: node}``: ``"*"`` any node, ``""`` not pipelined;
* ``phases: {ns/job: Phase}``: the PodGroup's phase after the cycle;
* ``calls: {verb: {min, max}}``: how often Volcano called a verb;
* ``why: {name: [line, ...]}``: lines ``policy-extender why NAME`` must print;
* ``panic: TEXT``: Volcano's code panics with it (any panic fails a case without it);
* ``releases: {v1.10: {...}}``: what an older release does instead.

With ``cycles: N`` (several cycles against the same serve, the cluster evolving between them),
``binds`` and ``evictions`` are the run's (every cycle's; a pod bound twice counts its last node),
``pipelined`` and ``phases`` the last cycle's, ``calls`` the run's totals, ``why`` asked after the
run; and:

* ``cycle: {N: {...}}``: what cycle N alone did (the keys above, ``why`` asked right after it);
* ``bound_by: {ns/pod: N}``: the pod is bound (to any node) in some cycle up to N;
* ``never_bound: [ns/pod]``: no cycle binds the pod (``never_evicted`` is over every cycle).
"""

from __future__ import annotations

import difflib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from policy_extender.verb_names.volcano import VICTIM_PLUGINS

from . import engine as engines
from .model import Case, FixtureError
from .results import ERROR, FAIL, PASS, SKIP, Result

RELEASE_ENV = "POLICY_EXTENDER_VOLCANO"
#: "0" (or --no-outcomes): outcome cases are reported SKIP, not run (answer cases alone)
ENABLED_ENV = "POLICY_EXTENDER_OUTCOMES"
CONF_ENV = "POLICY_EXTENDER_SCHEDULER_CONF"
SHIPPED_CONF = Path(__file__).resolve().parents[2] / "docker" / "k8s" / "sidecar" / "volcano-scheduler.conf"


@dataclass
class OutcomeSettings:
    """``--volcano`` and ``--scheduler-conf`` (or their environment variables, for pytest)."""

    release: str | None = None
    scheduler_conf: Path | None = None
    enabled: bool = True
    built: dict = field(default_factory=dict)  # release -> Engine, or the EngineUnavailable met

    @classmethod
    def from_environment(cls) -> "OutcomeSettings":
        conf = os.environ.get(CONF_ENV)
        return cls(os.environ.get(RELEASE_ENV) or None, Path(conf) if conf else None,
                   os.environ.get(ENABLED_ENV, "1") not in ("0", "false", "no"))

    def engine(self, release: str) -> engines.Engine:
        if release not in self.built:
            try:
                self.built[release] = engines.engine_for(release)
            except engines.EngineUnavailable as error:
                self.built[release] = error
        found = self.built[release]
        if isinstance(found, Exception):
            raise found
        return found


def conf_of(case: Case, settings: OutcomeSettings) -> Path:
    """The conf an outcome case runs with: its ``conf:``, ``--scheduler-conf`` (the run's choice
    over the file's), the file's ``scheduler_conf:``, or the shipped sidecar conf of this checkout."""
    for conf in (case.outcome.conf, settings.scheduler_conf, case.scheduler_conf):
        if conf is not None:
            return Path(conf)
    if SHIPPED_CONF.is_file():
        return SHIPPED_CONF
    raise FixtureError(case.mark, "no scheduler conf for this outcome case: name the conf the policy set is "
                       "deployed with, as `scheduler_conf:` in the fixture file or --scheduler-conf "
                       "(policy-extender volcano-conf writes one from your scheduler's)")


def run(case: Case, settings: OutcomeSettings) -> Result:
    """One outcome case's PASS, FAIL, ERROR or SKIP (not for this release)."""
    spec = case.outcome
    if not settings.enabled:
        return Result(case, SKIP, message=f"{case.where}: outcome case not run (--no-outcomes or {ENABLED_ENV}=0)")
    release = engines.choose_release(spec.release or settings.release)
    if not spec.applies_to(release):
        bounds = " and ".join(filter(None, [spec.since and f"since {spec.since}", spec.before and f"before {spec.before}"]))
        return Result(case, SKIP, message=f"{case.where}: not for Volcano {release} (this case applies {bounds})")
    conf = conf_of(case, settings)
    policies = spec.policy_texts if spec.policy_texts is not None else \
        {Path(f).name: Path(f).read_text(encoding="utf-8") for f in case.policy_files}
    want = spec.expect_for(release)
    engine = settings.engine(release)
    cycle_why = {n: sorted(w.get("why") or {}) for n, w in (want.get("cycle") or {}).items() if w.get("why")}
    report = engine.run(spec.scenario(policies, conf, sorted(want.get("why") or {}), cycle_why))
    actual = actual_of(report)
    if report.get("error"):
        return Result(case, ERROR, message=f"{case.where}: Volcano's scheduler {release} could not run the case: "
                                           f"{report['error']}", actual=actual)
    wrong = mismatches(want, actual)
    if actual["panic"] and "panic" not in want and not any("panic" in w for w in (want.get("cycle") or {}).values()):
        wrong.append("no panic")
    if not wrong:
        return Result(case, PASS, actual=actual)
    message = f"{case.where}: expected {', '.join(wrong)} did not hold (Volcano {release}, conf {conf})"
    return Result(case, FAIL, message=message, diff=diff(want, actual, wrong),
                  explanation=explanation(report, actual, want), actual=actual)


def actual_of(report: dict) -> dict:
    """What Volcano did, in the vocabulary of ``expect:``: over the run, and each cycle's."""
    return {"cycles": [_cycle_actual(cycle) for cycle in report.get("cycles") or []], **_run_actual(report)}


def _cycle_actual(cycle: dict) -> dict:
    return {"binds": cycle.get("binds") or {}, "evictions": sorted(cycle.get("evictions") or []),
            "pipelined": cycle.get("pipelined") or {}, "phases": cycle.get("phases") or {},
            "calls": cycle.get("calls") or {}, "why": cycle.get("why") or {}, "panic": cycle.get("panic") or "",
            "cycle_ms": cycle.get("elapsedMs")}


def _run_actual(report: dict) -> dict:
    return {"binds": report.get("binds") or {}, "evictions": sorted(report.get("evictions") or []),
            "pipelined": report.get("pipelined") or {}, "phases": report.get("phases") or {},
            "calls": report.get("calls") or {}, "why": report.get("why") or {}, "panic": report.get("panic") or "",
            "victim_calls": report.get("victimCalls") or [], "tiers": report.get("tiers") or [],
            "decisions": report.get("decisions") or [], "cycle_ms": report.get("elapsedMs"),
            "victim_why": {name: json.dumps(answer) for name, answer in (report.get("victimWhy") or {}).items()}}


def mismatches(want: dict, actual: dict) -> list[str]:
    """The expected keys that do not hold, in the order written (``cycle.N.KEY`` for a cycle's)."""
    wrong = []
    for key, value in want.items():
        if key == "cycle":
            for n, expected in value.items():
                cycles = actual.get("cycles") or []
                if n > len(cycles):  # the scheduler panicked before it: no such cycle ran
                    wrong.append(f"cycle.{n}")
                    continue
                wrong += [f"cycle.{n}.{sub}" for sub in mismatches(expected, cycles[n - 1])]
        elif not HOLDS[key](value, actual):
            wrong.append(key)
    return wrong


def first_cycle(actual: dict, what: str) -> dict[str, int]:
    """The first cycle (1, 2, ...) that bound (``binds``) or evicted (``evictions``) each pod."""
    first: dict[str, int] = {}
    for n, cycle in enumerate(actual.get("cycles") or [], 1):
        for pod in cycle[what]:
            first.setdefault(pod, n)
    return first


def _bound_by(want: dict, actual: dict) -> bool:
    bound = first_cycle(actual, "binds")
    return all(pod in bound and bound[pod] <= n for pod, n in want.items())


def _binds(want: dict, actual: dict) -> bool:
    got = actual["binds"]
    return set(want) == set(got) and all(node in ("*", got[pod]) for pod, node in want.items())


def _pipelined(want: dict, actual: dict) -> bool:
    got = actual["pipelined"]
    return all(got.get(pod, "") == node or (node == "*" and got.get(pod)) for pod, node in want.items())


def _calls(want: dict, actual: dict) -> bool:
    got = actual["calls"]
    return all((bounds.get("min") is None or got.get(verb, 0) >= bounds["min"])
               and (bounds.get("max") is None or got.get(verb, 0) <= bounds["max"]) for verb, bounds in want.items())


def _why(want: dict, actual: dict) -> bool:
    return all(line in actual["why"].get(name, "") for name, lines in want.items() for line in lines)


def _panic(want: str, actual: dict) -> bool:
    return bool(actual["panic"]) and want in actual["panic"]


HOLDS = {
    "binds": _binds,
    "evictions": lambda want, actual: sorted(want) == actual["evictions"],
    "never_evicted": lambda want, actual: not set(want) & set(actual["evictions"]),
    "pipelined": _pipelined,
    "phases": lambda want, actual: all(actual["phases"].get(job) == phase for job, phase in want.items()),
    "calls": _calls,
    "why": _why,
    "panic": _panic,
    "bound_by": _bound_by,
    "never_bound": lambda want, actual: not set(want) & set(first_cycle(actual, "binds")),
}


def _shown(key: str, want, actual: dict):
    """The actual value shown beside an expectation, in its shape."""
    if key == "never_evicted":
        return sorted(set(want) - set(actual["evictions"]))
    if key == "bound_by":
        bound = first_cycle(actual, "binds")
        return {pod: bound.get(pod, "never") for pod in want}
    if key == "never_bound":
        bound = first_cycle(actual, "binds")
        return sorted(pod for pod in want if pod not in bound)
    if key == "pipelined":
        return {pod: actual["pipelined"].get(pod, "") for pod in want} | \
            {pod: node for pod, node in actual["pipelined"].items() if pod not in want}
    if key == "phases":
        return {job: actual["phases"].get(job) for job in want}
    if key == "calls":
        return {verb: actual["calls"].get(verb, 0) for verb in want}
    if key == "why":
        return {name: [line for line in lines if line in actual["why"].get(name, "")] for name, lines in want.items()}
    return actual[key]


def diff(want: dict, actual: dict, wrong: list[str] | None = None) -> str:
    """The expectations that did not hold (``wrong``; all of ``want`` without it) beside what
    happened, in their shape; a cycle's under ``cycle: {N: ...}``."""
    wanted: dict = {}
    shown: dict = {}
    for key in wrong if wrong is not None else list(want):
        if key.startswith("cycle."):
            _, n, *sub = key.split(".", 2)
            cycles = actual.get("cycles") or []
            if not sub or int(n) > len(cycles):
                wanted.setdefault("cycle", {})[int(n)] = want["cycle"][int(n)]
                shown.setdefault("cycle", {})[int(n)] = "not run (Volcano panicked in an earlier cycle)"
                continue
            value = want["cycle"][int(n)][sub[0]]
            wanted.setdefault("cycle", {}).setdefault(int(n), {})[sub[0]] = value
            shown.setdefault("cycle", {}).setdefault(int(n), {})[sub[0]] = _shown(sub[0], value, cycles[int(n) - 1])
        elif key in want:
            wanted[key] = want[key]
            shown[key] = _shown(key, want[key], actual)
    shown_want = yaml.safe_dump(wanted, sort_keys=True, default_flow_style=False).splitlines()
    shown_actual = yaml.safe_dump(shown, sort_keys=True, default_flow_style=False).splitlines()
    return "\n".join(difflib.unified_diff(shown_want, shown_actual, "expected", "actual", lineterm=""))


def explanation(report: dict, actual: dict, want: dict) -> str:
    """Where the service's answers went: each victims call, then per eviction which tier's plugins
    could have chosen it; a panic; what ``why`` said when a line was missing."""
    lines = []
    if actual["panic"]:
        lines.append(f"Volcano's code panicked (the scheduler process would crash): {actual['panic']}")
    tiers = actual["tiers"]
    for call in actual["victim_calls"]:
        lines.append(_victim_call_line(call))
    evicted = set(actual["evictions"])
    for pod in sorted(evicted):
        lines.append(_eviction_line(pod, actual["victim_calls"], tiers))
    if "why" in want:
        for name, text in sorted(actual["why"].items()):
            lines.append(f"why {name}:\n" + "\n".join("  " + line for line in text.strip().splitlines()))
    counts = [d for d in actual["decisions"] if not d.endswith(" 0.0")]
    if counts:
        lines.append("the service's decisions: " + "; ".join(_decision_words(d) for d in counts))
    if report.get("error") or (actual["panic"] and report.get("serviceLog")):
        lines.append("service log:\n" + report.get("serviceLog", ""))
    return "\n".join(lines)


def _victim_call_line(call: dict) -> str:
    status = {1: "Permit", 0: "Abstain", -1: "Reject"}.get(int(call.get("status") or 0), str(call.get("status")))
    victims = call.get("victims") or []
    protected = sorted(set(call.get("evictees") or []) - set(victims))
    words = f"the service answered {call['verb']} for {call['evictor']}: {status}"
    if call.get("http") not in (None, 200):
        words = f"{call['verb']} for {call['evictor']}: HTTP {call['http']} (no answer: Volcano treats it as no victims)"
    elif call.get("status") == 1:
        words += f" with {', '.join(victims) or 'no victims'}" + (f"; protected: {', '.join(protected)}" if protected else "")
    return words


def _eviction_line(pod: str, calls: list, tiers: list) -> str:
    """Which tier's plugins evicted ``pod``, read from the service's answers and the conf."""
    asked = [c for c in calls if pod in (c.get("evictees") or [])]
    if not asked:
        return f"evicted {pod}: the service was never asked about it (no victims call named it)"
    call = asked[-1]
    action = "preempt" if call["verb"] == "preemptable" else "reclaim"
    switch = "preemptable" if action == "preempt" else "reclaimable"
    tier_of = next((i for i, tier in enumerate(tiers) if any(p["name"] == "extender" for p in tier)), None)
    if call.get("status") == 1 and pod in (call.get("victims") or []):
        return f"evicted {pod}: the service offered it ({call['verb']} Permit)"

    def deciders(indexes):
        return [f"tier {i + 1} {p['name']}" for i in indexes for p in tiers[i]
                if p["name"] != "extender" and p.get(switch) and action in VICTIM_PLUGINS.get(p["name"], ())
                and (p["name"], action) != ("drf", "reclaim")]  # drf reclaims only with enableHierarchy

    if tier_of is None:
        return f"evicted {pod}: the conf has no extender plugin in its tiers"
    if call.get("status") == 0:
        same = deciders([tier_of])
        later = deciders(range(tier_of + 1, len(tiers)))
        return (f"evicted {pod}: the service abstained, so the other {action} plugins decided: "
                f"{', '.join(same + later) or 'none enabled'} (an Abstain leaves the choice to them; "
                "`if none abstain` on a protecting rule does this)")
    later = deciders(range(tier_of + 1, len(tiers)))
    same = deciders([tier_of])
    return (f"evicted {pod}: the service protected it, but its tier ended with no victims and a later tier "
            f"decided from scratch: {', '.join(later) or 'none'}"
            + (f" (its own tier's {', '.join(same)} also vote)" if same else "")
            + "; volcano-conf --final-victims switches the other plugins' victim functions off")


def _decision_words(line: str) -> str:
    labels, _, count = line.partition("} ")
    fields = dict(part.split("=", 1) for part in labels.split("{", 1)[1].split(",") if "=" in part)
    fields = {k: v.strip('"') for k, v in fields.items()}
    rule = f" by {fields['rule']}" if fields.get("rule") else ""
    return f"{fields.get('verb')} {fields.get('outcome')}{rule} x{float(count):g}"


def rules_decided(actual: dict) -> set[str]:
    """The rules the service's decision counters name (coverage)."""
    names = set()
    for line in actual.get("decisions") or []:
        if "rule=\"" in line and not line.endswith(" 0.0"):
            name = line.split("rule=\"", 1)[1].split("\"", 1)[0]
            if name:
                names.add(name)
    return names


__all__ = ["OutcomeSettings", "run", "ERROR", "PASS", "FAIL", "SKIP"]
