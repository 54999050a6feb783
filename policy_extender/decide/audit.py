"""Shadow (audit) rules: evaluated on live calls, counted and shown by ``/why``, never deciding.

A rule marked ``audit`` (or every rule of a file that starts with ``audit``; docs/language.md) is
left out of the decisions of ``PolicySet``: ``PolicySet.audited`` holds it, by kind. After a verb
is decided, the functions below evaluate each audited rule of that verb's kinds **on its own**, as
if it were the only rule of its kind, on the same views and session env, and say what it would
have decided (its *outcome*). They cost what an enforced rule costs (the same compiled closures,
the reason rendered only for a would-be rejection), never raise (an evaluation error is the
outcome ``error``), and with no audited rule of the verb's kinds they return ``()`` after one dict
lookup. Each verb table entry's ``audit`` (``table.py``) calls its verb's function here with the
parts of its decoded request.

Outcomes (the ``outcome`` label of ``policy_extender_audit_decisions_total``):

=============================  =================================================================
kind                           outcome
=============================  =================================================================
filter                         ``reject`` (false or null) or ``pass``
score                          ``scored`` once per node, with the would-be contribution
victim/preemptable/reclaimable ``protect`` or ``evict``, once per evictee
enqueue                        ``reject`` or ``pass``; a ``permit`` rule ``permit`` or ``abstain``
overused                       ``overused`` or ``not_overused``
ready                          ``not_ready`` or ``ready``
any                            ``skip`` (its ``when`` was false: not counted), ``error``
=============================  =================================================================
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, Sequence

from policy_extender.decide.rules import SKIPPED, normalized, score, why, why_not
from policy_extender.errors import EvalError
from policy_extender.lang.budget import current as current_budget
from policy_extender.lang.compiler import CompiledRule
from policy_extender.lang.runtime import Context

#: Outcomes that are a rejection of the object (shown by ``/why`` with the rule's reason).
REJECTING = frozenset({"reject", "protect", "overused", "not_ready", "error"})
SKIP = "skip"


@dataclass(frozen=True, slots=True)
class Audited:
    """What one audited rule would have decided on one object."""

    rule: str
    outcome: str
    reason: str = ""
    item: str | None = None     # the node (score) or evictee (victims) it is about
    value: float | None = None  # score: the would-be weighted contribution


class AuditedSet(Protocol):
    """What the audit reads of a ``PolicySet`` (which imports this module through the verb table)."""

    @property
    def audited(self) -> dict[str, list[CompiledRule]]: ...

    @property
    def slots(self) -> int: ...


def has_audit(policy_set: object, *kinds: str) -> bool:
    audited = getattr(policy_set, "audited", None)
    return bool(audited) and any(kind in audited for kind in kinds)  # type: ignore[operator]  # not None: bool()


def _rules(policy_set: AuditedSet, *kinds: str) -> list[CompiledRule]:
    audited = policy_set.audited
    return [r for kind in kinds for r in audited.get(kind, ())]


def predicate(policy_set: AuditedSet, task: object, node: object, env: object) -> Sequence[Audited]:
    if not policy_set.audited or "filter" not in policy_set.audited:
        return ()
    c = Context(env, [None] * policy_set.slots, task=task, node=node)
    return [_boolean(rule, c, "pass", "reject", rejects_when_true=False) for rule in policy_set.audited["filter"]]


def enqueueable(policy_set: AuditedSet, job: object, env: object) -> Sequence[Audited]:
    if not policy_set.audited or "enqueue" not in policy_set.audited:
        return ()
    c = Context(env, [None] * policy_set.slots, _job=job)
    out = []
    for rule in policy_set.audited["enqueue"]:
        if rule.permit:
            out.append(_boolean(rule, c, "abstain", "permit", rejects_when_true=True, explain_true=True))
        else:
            out.append(_boolean(rule, c, "pass", "reject", rejects_when_true=False))
    return out


def overused(policy_set: AuditedSet, queue: object, env: object) -> Sequence[Audited]:
    return each_alone(policy_set, env, "overused", {"_queue": queue}, "not_overused", "overused",
                      rejects_when_true=True, explain_true=True)


def ready(policy_set: AuditedSet, job: object, env: object) -> Sequence[Audited]:
    return each_alone(policy_set, env, "ready", {"_job": job}, "ready", "not_ready", rejects_when_true=False)


def each_alone(policy_set: AuditedSet, env: object, kind: str, roots: dict[str, Any], neutral: str, deciding: str, *,
               rejects_when_true: bool, explain_true: bool = False) -> Sequence[Audited]:
    """Each audited boolean rule of ``kind`` alone on the views ``roots`` (the rule context's
    roots by name: ``task``, ``_job``, ``_queue``...): what a verb answered with one vote needs
    (``overused``, ``ready``; a new verb of that shape can use it from its table entry)."""
    rules = policy_set.audited.get(kind) if policy_set.audited else None
    if not rules:
        return ()
    c = Context(env, [None] * policy_set.slots, **roots)
    return [_boolean(rule, c, neutral, deciding, rejects_when_true=rejects_when_true, explain_true=explain_true)
            for rule in rules]


def prioritize(policy_set: AuditedSet, task: object, nodes: Sequence[Any], env: object) -> Sequence[Audited]:
    if not policy_set.audited or "score" not in policy_set.audited:
        return ()
    shared = current_budget()  # the call's (lang/budget.py)
    contexts = [Context(env, [None] * policy_set.slots, task=task, node=n, budget=shared) for n in nodes]
    out = []
    for rule in policy_set.audited["score"]:
        try:
            raw = [score(rule, c) for c in contexts]
        except EvalError as err:
            out.append(Audited(rule.name, "error", rule.prefix + str(err)))
            continue
        if all(v is SKIPPED for v in raw):
            continue
        values = normalized(raw, rule.normalize)
        for node, r, v in zip(nodes, raw, values):
            if r is not SKIPPED:
                out.append(Audited(rule.name, "scored", item=node.name, value=v * rule.weight))
    return out


def victims(policy_set: AuditedSet, kinds: tuple[str, ...], evictor: object, evictees: Sequence[object],
            env: object) -> Sequence[Audited]:
    """``kinds``: the rule kinds that decide the verb (its verb table entry's ``rule_kinds``)."""
    rules = _rules(policy_set, *kinds) if policy_set.audited else ()
    if not rules:
        return ()
    out, shared = [], current_budget()
    for i, evictee in enumerate(evictees):
        c = Context(env, [None] * policy_set.slots, evictor=evictor, evictee=evictee, budget=shared)
        item = getattr(evictee, "name", None) or f"[{i}]"
        for rule in rules:
            found = _boolean(rule, c, "evict", "protect", rejects_when_true=False)
            out.append(Audited(found.rule, found.outcome, found.reason, item))
    return out


def _boolean(rule: CompiledRule, c: Context, neutral: str, deciding: str, *, rejects_when_true: bool,
             explain_true: bool = False) -> Audited:
    """One boolean rule alone: ``deciding`` when it would decide (true for overused/permit,
    false or null otherwise), ``neutral`` when not, ``skip`` when its ``when`` is false."""
    try:
        if rule.applies is not None and not rule.evaluate(rule.applies, c):
            return Audited(rule.name, SKIP)
        passed = rule.evaluate(rule.test, c) is True
        decides = passed if rejects_when_true else not passed
        if not decides:
            return Audited(rule.name, neutral)
        return Audited(rule.name, deciding, why(rule, c) if explain_true else why_not(rule, c))
    except EvalError as err:
        return Audited(rule.name, "error", rule.prefix + str(err))


def as_fixture(audited: Sequence[Audited]) -> dict:
    """Outcomes in the shape a fixture's ``expect: {audit: ...}`` is written: ``{rule: outcome}``,
    or for score and victims ``{rule: {node or evictee: contribution or outcome}}``."""
    out: dict = {}
    for a in audited:
        if a.item is None:
            out[a.rule] = a.outcome
        else:
            out.setdefault(a.rule, {})[a.item] = a.value if a.outcome == "scored" else a.outcome
    return out
