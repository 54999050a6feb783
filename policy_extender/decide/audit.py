"""Shadow (audit) rules: evaluated on live calls, counted and shown by ``/why``, never deciding.

A rule marked ``audit`` (or every rule of a file that starts with ``audit``; docs/language.md) is
left out of the decisions of ``PolicySet``: ``PolicySet.audited`` holds it, by kind. After a verb
is decided, the functions below evaluate each audited rule of that verb's kinds **on its own**, as
if it were the only rule of its kind, on the same views and session env, and say what it would
have decided (its *outcome*). They cost what an enforced rule costs (the same compiled closures,
the reason rendered only for a would-be rejection), never raise (an evaluation error is the
outcome ``error``), and with no audited rule of the verb's kinds they return ``()`` after one dict
lookup.

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

from policy_extender.decide.names import (JOB_ENQUEUEABLE, JOB_READY, PREDICATE, PREEMPTABLE, PRIORITIZE,
                                          QUEUE_OVERUSED, RECLAIMABLE)
from policy_extender.decide.policy_set import _SKIPPED, _normalized, _score, _why, _why_not
from policy_extender.decide.table import VERBS
from policy_extender.errors import EvalError
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


def has_audit(policy_set, *kinds: str) -> bool:
    audited = getattr(policy_set, "audited", None)
    return bool(audited) and any(kind in audited for kind in kinds)  # type: ignore[operator]  # not None: bool()


def _rules(policy_set, *kinds: str) -> list:
    audited = policy_set.audited
    return [r for kind in kinds for r in audited.get(kind, ())]


def predicate(policy_set, task, node, env) -> tuple[Audited, ...] | list[Audited]:
    if not policy_set.audited or "filter" not in policy_set.audited:
        return ()
    c = Context(env, [None] * policy_set._slots, task=task, node=node)
    return [_boolean(rule, c, "pass", "reject", rejects_when_true=False) for rule in policy_set.audited["filter"]]


def enqueueable(policy_set, job, env):
    if not policy_set.audited or "enqueue" not in policy_set.audited:
        return ()
    c = Context(env, [None] * policy_set._slots, _job=job)
    out = []
    for rule in policy_set.audited["enqueue"]:
        if rule.permit:
            out.append(_boolean(rule, c, "abstain", "permit", rejects_when_true=True, explain_true=True))
        else:
            out.append(_boolean(rule, c, "pass", "reject", rejects_when_true=False))
    return out


def overused(policy_set, queue, env):
    if not policy_set.audited or "overused" not in policy_set.audited:
        return ()
    c = Context(env, [None] * policy_set._slots, _queue=queue)
    return [_boolean(rule, c, "not_overused", "overused", rejects_when_true=True, explain_true=True)
            for rule in policy_set.audited["overused"]]


def ready(policy_set, job, env):
    if not policy_set.audited or "ready" not in policy_set.audited:
        return ()
    c = Context(env, [None] * policy_set._slots, _job=job)
    return [_boolean(rule, c, "ready", "not_ready", rejects_when_true=False) for rule in policy_set.audited["ready"]]


def prioritize(policy_set, task, nodes, env):
    if not policy_set.audited or "score" not in policy_set.audited:
        return ()
    contexts = [Context(env, [None] * policy_set._slots, task=task, node=n) for n in nodes]
    out = []
    for rule in policy_set.audited["score"]:
        try:
            raw = [_score(rule, c) for c in contexts]
        except EvalError as err:
            out.append(Audited(rule.name, "error", rule.prefix + str(err)))
            continue
        if all(v is _SKIPPED for v in raw):
            continue
        values = _normalized(raw, rule.normalize)
        for node, r, v in zip(nodes, raw, values):
            if r is not _SKIPPED:
                out.append(Audited(rule.name, "scored", item=node.name, value=v * rule.weight))
    return out


def victims(policy_set, kind: str, evictor, evictees, env):
    rules = _rules(policy_set, *VERBS[kind].rule_kinds) if policy_set.audited else ()
    if not rules:
        return ()
    out = []
    for i, evictee in enumerate(evictees):
        c = Context(env, [None] * policy_set._slots, evictor=evictor, evictee=evictee)
        item = getattr(evictee, "name", None) or f"[{i}]"
        for rule in rules:
            found = _boolean(rule, c, "evict", "protect", rejects_when_true=False)
            out.append(Audited(found.rule, found.outcome, found.reason, item))
    return out


def _boolean(rule, c: Context, neutral: str, deciding: str, *, rejects_when_true: bool,
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
        return Audited(rule.name, deciding, _why(rule, c) if explain_true else _why_not(rule, c))
    except EvalError as err:
        return Audited(rule.name, "error", rule.prefix + str(err))


def as_fixture(audited) -> dict:
    """Outcomes in the shape a fixture's ``expect: {audit: ...}`` is written: ``{rule: outcome}``,
    or for score and victims ``{rule: {node or evictee: contribution or outcome}}``."""
    out: dict = {}
    for a in audited:
        if a.item is None:
            out[a.rule] = a.outcome
        else:
            out.setdefault(a.rule, {})[a.item] = a.value if a.outcome == "scored" else a.outcome
    return out


def evaluate(policy_set, verb: str, request, env):
    """The audited rules of a deciding verb on its decoded ``request`` (``()`` without any)."""
    if not policy_set.audited:
        return ()
    if verb == PREDICATE:
        return predicate(policy_set, request.task, request.node, env)
    if verb == PRIORITIZE:
        return prioritize(policy_set, request.task, request.nodes, env)
    if verb in (PREEMPTABLE, RECLAIMABLE):
        return victims(policy_set, verb, request.evictor, request.evictees, env)
    if verb == JOB_ENQUEUEABLE:
        return enqueueable(policy_set, request.job, env)
    if verb == QUEUE_OVERUSED:
        return overused(policy_set, request.queue, env)
    if verb == JOB_READY:
        return ready(policy_set, request.job, env)
    raise ValueError(f"{verb} is not a deciding verb")
