"""The one verb table: every verb Volcano's extender plugin calls (``names``), and for each what
decodes its body, which rules decide it, how the decision goes on the wire, how its audit rules
are evaluated, how its calls are tallied and shown by ``/why``, and how fixtures and replay name
and read it. Everything else about verbs derives from ``VERBS``: the handlers
(``handlers.HANDLERS``), the step after a decision (``observe.after``), the tally's ``/why``
answer and ``policy-extender why`` (``tallying.shapes_of``), the fixture runner's bodies and
expectations. ``tests/decide/test_verb_table.py`` lists what an entry must give.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

from policy_extender.decide import audit, session_verbs
from policy_extender.decide.audit import Audited
from policy_extender.decide.decisions import Decision
from policy_extender.decide.reply import Reply
from policy_extender.decide.tally_shapes import (VICTIMS, PredicateShape, ScoreShape, Shape, VoteShape, object_name,
                                                 shapes_of)
from policy_extender.decide.worker_state import WorkerState
from policy_extender.verb_names import volcano as names
from policy_extender.wire import compact, decode, encode, open_stream, prioritize_stream

#: ``Verb.session``: how a verb's handler reads the session head
SESSION_CACHE, SESSION_STORE, SESSION_OPENS, SESSION_NONE = "cache", "store", "opens", "none"


@dataclass(frozen=True)
class Verb:
    """One verb. ``decide`` is None for the session and event verbs (they decide nothing)."""

    name: str                                  # the verb kind (Volcano's ``extender.<name>Verb``, or kube_table's)
    decode: Callable[..., Any]                 # (body, reads, env) -> request of wire views
    decide: Callable[[Any, Any, Any], Decision] | None = None  # (policy set, request, env) -> decision
    encode: Callable[[Any, Any], bytes] | None = None     # (decision, request) -> Go response JSON
    outcome: Callable[[Any], str] = lambda decision: ""   # the word logged and counted
    audit: Callable[[Any, Any, Any], Sequence[Audited]] | None = None  # (policy set, request, env) -> audit.Audited's
    tally: Shape | None = None                 # how its calls are tallied and shown by /why (tallying.py)
    decision: str = ""                         # the decision's name in policies and fixtures
    rule_kinds: tuple[str, ...] = ()           # the rule kinds that decide it, in order
    inputs: tuple[str, ...] = ()               # the request body's objects (compact fixture inputs)
    compact: Callable[..., Any] | None = None  # the ``wire.compact`` builder of its body from them
    expect: frozenset[str] = frozenset()       # what a fixture's ``expect:`` may name
    answer: str = ""                           # the answer's shape: fit, scores, victims or vote
    answer_key: str = ""                       # vote: the answer's key (``status``, ``overused``)
    value_name: str = ""                       # vote: what ``expect:`` calls that value
    subject: Callable[[Any], Any] | None = None  # the task whose job must be in the snapshot
    handle: Callable[[WorkerState, bytes], Reply] | None = None  # the handler of a verb that decides nothing
    protocol: str = "volcano"                  # the scheduler calling it (``PolicySet.for_protocol``)
    error_in_answer: Callable[[str], bytes] | None = None  # a failure to decide as a 200 answer saying so
    error_body: Callable[[str], bytes] | None = None       # the body of an error status (None: {"error": ...})
    #: how its handler reads the session head: ``SESSION_CACHE`` (the SessionCache's env), ``SESSION_STORE``
    #: (``sessions.head()`` itself), ``SESSION_OPENS`` (it opens the session), ``SESSION_NONE`` (none)
    session: str = SESSION_CACHE
    #: the ``wire`` stream that decodes its body while it arrives (``web.dispatch.read_streamed``)
    stream: Callable[..., Any] | None = None
    #: every call is handed to the request log's notable-call hook (the late-open watch), not
    #: only the non-200s
    notable: bool = False
    #: its answer carries whole objects from the request and is redacted like it (``--record``)
    redact_answer: bool = False


_STATUS_WORDS = {1: "permit", 0: "abstain", -1: "reject"}


def _victims(name: str) -> Verb:
    kinds = ("victim", name)
    return Verb(name, decode.decode_victims, redact_answer=True,
                decide=lambda ps, r, env: ps.victims(name, r.evictor, r.evictees, env),
                encode=lambda d, r: encode.victims(d, r.raw_evictees),
                outcome=lambda d: {1: "evict", -1: "reject"}.get(d.status, ""),
                audit=lambda ps, r, env: audit.victims(ps, kinds, r.evictor, r.evictees, env), tally=VICTIMS,
                decision=name, rule_kinds=kinds, inputs=("evictor", "evictees"), compact=compact.victims_body,
                expect=frozenset({"status", "victims"}), answer="victims", subject=lambda r: r.evictor)


def _vote(name: str, decision: str, decoder: Callable[..., Any], *, decide: Callable[[Any, Any, Any], Any],
          encoder: Callable[[Any], bytes], outcome: Callable[[Any], str], audits: Callable[[Any, Any, Any], Any],
          tally: VoteShape, keys: tuple[str, str], inputs: tuple[str, ...], builder: Callable[..., Any]) -> Verb:
    """A verb answered with one value: ``keys`` is (its key on the wire, its name in ``expect:``)."""
    return Verb(name, decoder, decide=decide, encode=lambda d, r: encoder(d), outcome=outcome, audit=audits,
                tally=tally, decision=decision, rule_kinds=(decision,), inputs=inputs, compact=builder,
                answer="vote", answer_key=keys[0], value_name=keys[1], expect=frozenset({keys[1], "rule", "reason"}))


VERBS: dict[str, Verb] = {v.name: v for v in (
    Verb(names.ON_SESSION_OPEN, decode.decode_session_open, handle=session_verbs.on_session_open, session=SESSION_OPENS,
         stream=open_stream.OpenStream, notable=True),
    Verb(names.ON_SESSION_CLOSE, decode.decode_session_close, handle=session_verbs.on_session_close, session=SESSION_STORE),
    Verb(names.PREDICATE, decode.decode_predicate,
         decide=lambda ps, r, env: ps.predicate(r.task, r.node, env),
         encode=lambda d, r: encode.predicate(d), outcome=lambda d: "" if d.fits else "reject",
         audit=lambda ps, r, env: audit.predicate(ps, r.task, r.node, env), tally=PredicateShape(names.PREDICATE),
         decision="filter", rule_kinds=("filter",), inputs=("task", "node"), compact=compact.predicate_body,
         expect=frozenset({"fits", "code", "reason", "rule"}), answer="fit", subject=lambda r: r.task),
    Verb(names.PRIORITIZE, decode.decode_prioritize,
         decide=lambda ps, r, env: ps.prioritize(r.task, r.nodes, env),
         encode=lambda d, r: encode.prioritize(d, r.nodes),
         audit=lambda ps, r, env: audit.prioritize(ps, r.task, r.nodes, env), tally=ScoreShape(names.PRIORITIZE),
         decision="score", rule_kinds=("score",), inputs=("task", "nodes"), compact=compact.prioritize_body,
         expect=frozenset({"scores", "order"}), answer="scores", subject=lambda r: r.task,
         stream=prioritize_stream.PrioritizeStream),
    _victims(names.PREEMPTABLE),
    _victims(names.RECLAIMABLE),
    _vote(names.QUEUE_OVERUSED, "overused", decode.decode_queue,
          decide=lambda ps, r, env: ps.overused(r.queue, env), encoder=encode.overused,
          outcome=lambda d: "overused" if d.value else "not_overused",
          audits=lambda ps, r, env: audit.overused(ps, r.queue, env),
          tally=VoteShape("queue", "o", "overused", lambda r: r.queue.name or "?",
                          {"overused": "overused by", "not_overused": "not overused"}, lambda outcome: "overused"),
          keys=("overused", "overused"), inputs=("queue",), builder=compact.queue_body),
    _vote(names.JOB_ENQUEUEABLE, "enqueue", decode.decode_job,
          decide=lambda ps, r, env: ps.enqueueable(r.job, env), encoder=encode.enqueueable,
          outcome=lambda d: _STATUS_WORDS.get(d.status, "abstain"),
          audits=lambda ps, r, env: audit.enqueueable(ps, r.job, env),
          tally=VoteShape("job", "q", "enqueue", lambda r: object_name(r.job),
                          {"reject": "enqueue rejected by", "permit": "enqueue permitted by",
                           "abstain": "enqueue: no rule decided"}, lambda outcome: f"enqueue {outcome}"),
          keys=("status", "status"), inputs=("job",), builder=compact.job_body),
    Verb(names.JOB_ENQUEUED, decode.decode_job, handle=session_verbs.job_enqueued, session=SESSION_STORE),
    _vote(names.JOB_READY, "ready", decode.decode_job,
          decide=lambda ps, r, env: ps.ready(r.job, env), encoder=encode.ready,
          outcome=lambda d: "ready" if d.value else "not_ready",
          audits=lambda ps, r, env: audit.ready(ps, r.job, env),
          tally=VoteShape("job", "r", "ready", lambda r: object_name(r.job),
                          {"not_ready": "not ready by", "ready": "ready"},
                          lambda outcome: "ready" if outcome == "ready" else "not ready"),
          keys=("status", "ready"), inputs=("job",), builder=compact.job_body),
    Verb(names.ALLOCATE, decode.decode_task_event, inputs=("task",), handle=session_verbs.allocate, session=SESSION_STORE),
    Verb(names.DEALLOCATE, decode.decode_task_event, inputs=("task",), handle=session_verbs.deallocate, session=SESSION_STORE),
)}

VERB_KINDS = names.VERB_KINDS
assert tuple(VERBS) == VERB_KINDS, "the table lists every verb kind once, in names.VERB_KINDS order"

#: The verbs whose answer is a decision of the policies.
DECIDING: tuple[str, ...] = tuple(name for name, verb in VERBS.items() if verb.decide is not None)

#: The tally's shapes of the deciding verbs, each once, in the table's order (``/why``'s sections).
SHAPES: tuple[Shape, ...] = shapes_of(VERBS.values())

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
