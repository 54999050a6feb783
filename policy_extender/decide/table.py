"""The one verb table: every verb Volcano's extender plugin calls (``names``), and for each what
decodes its body, which rules decide it, how the decision goes on the wire, and how fixtures and
replay name and read it. Everything else about verbs derives from ``VERBS``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from policy_extender.decide import session_verbs
from policy_extender.verb_names import volcano as names
from policy_extender.wire import decode, encode


@dataclass(frozen=True)
class Verb:
    """One verb. ``decide`` is None for the session and event verbs (they decide nothing)."""

    name: str                                  # Volcano's verb kind (``extender.<name>Verb``)
    decode: Callable[..., Any]                 # (body, reads, env) -> request of wire views
    decide: Callable[[Any, Any, Any], Any] | None = None  # (policy set, request, env) -> decision
    encode: Callable[[Any, Any], bytes] | None = None     # (decision, request) -> Go response JSON
    outcome: Callable[[Any], str] = lambda decision: ""   # the word logged and counted
    decision: str = ""                         # the decision's name in policies and fixtures
    rule_kinds: tuple[str, ...] = ()           # the rule kinds that decide it, in order
    inputs: tuple[str, ...] = ()               # the request body's objects (compact fixture inputs)
    compact: str = ""                          # the ``wire.compact`` builder of its body from them
    expect: frozenset[str] = frozenset()       # what a fixture's ``expect:`` may name
    answer: str = ""                           # the answer's shape: fit, scores, victims or vote
    answer_key: str = ""                       # vote: the answer's key (``status``, ``overused``)
    value_name: str = ""                       # vote: what ``expect:`` calls that value
    subject: Callable[[Any], Any] | None = None  # the task whose job must be in the snapshot
    handle: Callable[[Any, bytes], Any] | None = None  # the handler of a verb that decides nothing


_STATUS_WORDS = {1: "permit", 0: "abstain", -1: "reject"}


def _victims(name: str) -> Verb:
    return Verb(name, decode.decode_victims,
                decide=lambda ps, r, env: ps.victims(name, r.evictor, r.evictees, env),
                encode=lambda d, r: encode.victims(d, r.raw_evictees),
                outcome=lambda d: {1: "evict", -1: "reject"}.get(d.status, ""),
                decision=name, rule_kinds=("victim", name), inputs=("evictor", "evictees"), compact="victims_body",
                expect=frozenset({"status", "victims"}), answer="victims", subject=lambda r: r.evictor)


def _vote(name: str, decision: str, decoder, decide, encoder, outcome, keys: tuple[str, str], inputs,
          compact: str) -> Verb:
    """A verb answered with one value: ``keys`` is (its key on the wire, its name in ``expect:``)."""
    return Verb(name, decoder, decide=decide, encode=lambda d, r: encoder(d), outcome=outcome,
                decision=decision, rule_kinds=(decision,), inputs=inputs, compact=compact, answer="vote",
                answer_key=keys[0], value_name=keys[1], expect=frozenset({keys[1], "rule", "reason"}))


VERBS: dict[str, Verb] = {v.name: v for v in (
    Verb(names.ON_SESSION_OPEN, decode.decode_session_open, handle=session_verbs.on_session_open),
    Verb(names.ON_SESSION_CLOSE, decode.decode_session_close, handle=session_verbs.on_session_close),
    Verb(names.PREDICATE, decode.decode_predicate,
         decide=lambda ps, r, env: ps.predicate(r.task, r.node, env),
         encode=lambda d, r: encode.predicate(d), outcome=lambda d: "" if d.fits else "reject",
         decision="filter", rule_kinds=("filter",), inputs=("task", "node"), compact="predicate_body",
         expect=frozenset({"fits", "code", "reason", "rule"}), answer="fit", subject=lambda r: r.task),
    Verb(names.PRIORITIZE, decode.decode_prioritize,
         decide=lambda ps, r, env: ps.prioritize(r.task, r.nodes, env),
         encode=lambda d, r: encode.prioritize(d, r.nodes),
         decision="score", rule_kinds=("score",), inputs=("task", "nodes"), compact="prioritize_body",
         expect=frozenset({"scores", "order"}), answer="scores", subject=lambda r: r.task),
    _victims(names.PREEMPTABLE),
    _victims(names.RECLAIMABLE),
    _vote(names.QUEUE_OVERUSED, "overused", decode.decode_queue, lambda ps, r, env: ps.overused(r.queue, env),
          encode.overused, lambda d: "overused" if d.value else "not_overused", ("overused", "overused"), ("queue",), "queue_body"),
    _vote(names.JOB_ENQUEUEABLE, "enqueue", decode.decode_job, lambda ps, r, env: ps.enqueueable(r.job, env),
          encode.enqueueable, lambda d: _STATUS_WORDS.get(d.status, "abstain"), ("status", "status"), ("job",), "job_body"),
    Verb(names.JOB_ENQUEUED, decode.decode_job, handle=session_verbs.job_enqueued),
    _vote(names.JOB_READY, "ready", decode.decode_job, lambda ps, r, env: ps.ready(r.job, env),
          encode.ready, lambda d: "ready" if d.value else "not_ready", ("status", "ready"), ("job",), "job_body"),
    Verb(names.ALLOCATE, decode.decode_task_event, inputs=("task",), handle=session_verbs.allocate),
    Verb(names.DEALLOCATE, decode.decode_task_event, inputs=("task",), handle=session_verbs.deallocate),
)}

VERB_KINDS = names.VERB_KINDS
assert tuple(VERBS) == VERB_KINDS, "the table lists every verb kind once, in names.VERB_KINDS order"

#: The verbs whose answer is a decision of the policies.
DECIDING: tuple[str, ...] = tuple(name for name, verb in VERBS.items() if verb.decide is not None)

#: Decision name (``filter``, ``score``, ``enqueue``, ...) -> its verb.
BY_DECISION: dict[str, Verb] = {verb.decision: verb for verb in VERBS.values() if verb.decision}

#: Rule kind -> the verbs its rules decide (``victim`` rules decide both victim verbs).
VERBS_OF_RULE_KIND: dict[str, tuple[str, ...]] = {
    kind: tuple(name for name, verb in VERBS.items() if kind in verb.rule_kinds)
    for verb in VERBS.values() for kind in verb.rule_kinds}


def verb_named(word: str) -> Verb | None:
    """The deciding verb called ``word``: its wire name or its decision name."""
    verb = VERBS.get(word) or BY_DECISION.get(word)
    return verb if verb is not None and verb.decide is not None else None
