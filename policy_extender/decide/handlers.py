"""The verb handlers: body bytes in, the scheduler's response bytes out, one per entry of the verb
tables (Volcano's ``table.VERBS``, kube-scheduler's ``kube_table.KUBE_VERBS``), on a worker's state
(``WorkerState``: the part of ``policy_extender.service.WorkerState`` they use).

Every deciding verb reads the session head once (through the worker's SessionCache), takes the
policy set *pinned* for that session (or the current one with no session), decodes the body
pruned to what that set reads, decides, and encodes the exact Go response type. onSessionOpen
stores the pruned snapshot pinned to the current version; the allocate/deallocate events record
the task in the shared store. kube-scheduler's verbs have no session: they decide with the
current set's kube-scheduler rules (``without_session``).
"""

from __future__ import annotations

import logging
import operator
from typing import Any, Callable

import orjson

from policy_extender import metrics
from policy_extender.decide import audit, observe
from policy_extender.decide.decisions import FITS, Decision
from policy_extender.decide.worker_state import WorkerState
from policy_extender.decide.reply import Reply, VerbError, error_reply
from policy_extender.decide.session_verbs import current_policy
from policy_extender.decide.kube_table import KUBE_VERBS
from policy_extender.decide.table import VERBS, Verb
from policy_extender.decide.tallying import window_head
from policy_extender.errors import EvalError
from policy_extender.lang import budget
from policy_extender.session.store import SessionLost, StoreUnavailable
from policy_extender.verb_names.volcano import PREDICATE
from policy_extender.wire import WireError, decode, encode
from policy_extender.wire.kube import NODE_CACHE_REFUSAL, NodeCacheRefused
from policy_extender.wire.session_views import NO_SESSION

log = logging.getLogger("policy_extender.web")

#: the ``decision`` of a call refused by ``require_session`` (its log line is DEBUG, not ERROR)
NO_SESSION_DECISION = "no_session"


def respond(service: WorkerState, kind: str, body: bytes, deadline: float | None = None) -> Reply:
    """The reply to one verb call's body, errors included: what HTTP, replay and the fixture
    runner all answer. A body that cannot be decoded is a 400, a session lost by the store or
    a store that cannot be reached a 503, a call ``require_session`` refuses a 500 (logged once
    per cycle by session_gaps), and a failure while deciding (an ``EvalError``, a bug) a logged 500, so Volcano's
    ``extender.ignorable`` decides.

    The call evaluates under one budget (``lang.budget``): ``MAX_WORK`` elements for all its
    evaluations together (E512), and ``deadline`` (``time.monotonic()``; the web layer gives
    Volcano's verbs ``volcano_timeout`` after the request began to arrive) past which it stops (E513)."""
    previous = budget.begin(deadline, service.config.volcano_timeout)
    try:
        return HANDLERS[kind](service, body)
    except Exception as exc:
        return failed(kind, exc)
    finally:
        budget.end(previous)


def failed(kind: str, exc: Exception) -> Reply:
    """:func:`respond`'s answer to a ``kind`` handler that raised ``exc``."""
    verb = ANSWERS_ERRORS_ITSELF.get(kind)
    if verb is not None:  # kube-scheduler's: errors in its own keys
        return failed_in_go_keys(verb, exc)
    if isinstance(exc, WireError):
        return error_reply(400, f"{kind}: {exc}")
    if isinstance(exc, SessionLost):  # logged by the session cache, once per occurrence
        return error_reply(503, f"{kind}: {exc}")
    if isinstance(exc, StoreUnavailable):  # Redis down, paused or failing over (logged with the non-200s)
        return error_reply(503, f"{kind}: {exc}")
    if isinstance(exc, SessionRequired):  # logged once per cycle by session_gaps, not once per call
        return Reply(orjson.dumps({"error": exc.message}), 500, NO_SESSION_DECISION)
    if isinstance(exc, VerbError):  # logged once, with the other non-200s, by the request callback
        return error_reply(exc.status, exc.message, exc.headers)
    if isinstance(exc, EvalError):  # a bound the rule met (E51x): its file:line:col says where, no traceback
        log.error("%s failed: %s", kind, exc)
        return error_reply(500, f"{kind} failed: {type(exc).__name__}: {exc}")
    log.error("%s failed", kind, exc_info=exc)
    return error_reply(500, f"{kind} failed: {type(exc).__name__}: {exc}")


def failed_in_go_keys(verb: Verb, exc: Exception) -> Reply:
    """The answer of a kube-scheduler verb that raised ``exc``, in its own body (``{"Error": ...}``,
    Go's key): a body it cannot read (a bad quantity, no pod) is a 400, a refusal of the service
    (no policy set loaded) its status; a node-cache body it refuses and a failure while deciding
    (an ``EvalError``) are the verb's error answer (the filter's 200 with ``Error`` set, which
    kube-scheduler turns into the pod's failed attempt) or a 500 (prioritize, preempt), so
    kube-scheduler's ``ignorable`` decides."""
    error_body: Callable[[str], bytes] = verb.error_body  # type: ignore[assignment]  # ANSWERS_ERRORS_ITSELF's
    if isinstance(exc, NodeCacheRefused):
        message = f"{verb.name}: {NODE_CACHE_REFUSAL}"
    elif isinstance(exc, WireError):
        return Reply(error_body(f"{verb.name}: {exc}"), 400, "error")
    elif isinstance(exc, VerbError):
        return Reply(error_body(exc.message), exc.status, "error", "", exc.headers)
    else:
        log.error("%s failed", verb.name, exc_info=exc)
        message = f"{verb.name} failed: {exc}" if isinstance(exc, EvalError) \
            else f"{verb.name} failed: {type(exc).__name__}: {exc}"
    if verb.error_in_answer is not None:
        return Reply(verb.error_in_answer(message), 200, "error", getattr(exc, "rule", None) or "")
    return Reply(error_body(message), 500, "error")


def policy_and_env(service: WorkerState, kind: str, env: Any = None) -> tuple[Any, Any]:
    """The policy set and Env of this call: one head() read, one policy version per cycle.

    A call with no session open is counted and logged (decide/session_gaps.py); with
    ``require_session`` it is answered 500 when the set's ``kind`` rules read session data.
    With a session, the pair is kept (``service.decided_with``) and given again while the
    session cache answers the same env: the same head, so the same session (already noted in
    the gaps) and the same pinned version, whose set is the same."""
    if env is None:  # the caller may have read it (and found it was not the kept one)
        env = service.session_cache.env()
        kept = service.decided_with
        if kept[1] is env:
            return kept
    head = getattr(env, "head", None)
    gaps = service.session_gaps
    if head is None:
        service.decided_with = (None, None)  # the ended session's env is not kept alive
        policy_set = current_policy(service)
        if gaps is not None:
            gaps.no_session(kind)
        if service.config.require_session and kind in policy_set.session_verbs:
            raise SessionRequired(kind, "no scheduling session is open (onSessionOpen did not "
                                  "arrive, failed or timed out; see docs/operations.md, \"Calls "
                                  "without a session\")")
        return policy_set, env
    if gaps is not None and gaps.last_session_id != head.session_id:
        gaps.saw_session(head.session_id)
    kept = service.policies.pinned(head.policy_version, service.sessions.policy_sources), env
    service.decided_with = kept
    return kept


def job_not_in_snapshot(service: WorkerState, kind: str, policy_set: Any, env: Any, job_uid: str) -> None:
    """The task's job is not in the open session's snapshot: counted, and refused with
    ``require_session`` when the set's ``kind`` rules read session data."""
    if service.session_gaps is not None:
        service.session_gaps.job_not_in_snapshot(kind, env.head.session_id, job_uid)
    if service.config.require_session and kind in policy_set.session_verbs:
        raise SessionRequired(kind, f"the task's job {job_uid or '(none)'} is not in the open "
                              "session's snapshot (see docs/operations.md, \"Calls without a session\")")


class SessionRequired(VerbError):
    """``require_session``: a 500, so that Volcano's ``extender.ignorable`` decides."""

    def __init__(self, kind: str, why: str) -> None:
        super().__init__(500, f"{kind}: {why}, and the policies' {kind} rules read session data; "
                         "require_session is on, so this call is refused and Volcano's "
                         "extender.ignorable decides")


# ---------------------------------------------------------------------------------------------
# decisions


def _deciding_parts(verb: Verb) -> tuple[Callable[[Any, Any, Any], Decision], Callable[[Any, Any], bytes]]:
    """A deciding verb's decide and encode (ValueError for a verb without both)."""
    if verb.decide is None or verb.encode is None:
        raise ValueError(f"{verb.name} is not a deciding verb (its table entry has no decide or encode)")
    return verb.decide, verb.encode


def _handler(verb: Verb) -> Callable[[WorkerState, bytes], Reply]:
    """A verb's handler: ``deciding`` for a deciding verb, its own ``handle`` otherwise."""
    if verb.decide is not None:
        return deciding(verb)
    if verb.handle is None:
        raise ValueError(f"{verb.name} has neither decide nor handle in the verb table")
    return verb.handle


def deciding(verb: Verb) -> Callable[[WorkerState, bytes], Reply]:
    """The handler of a deciding verb: one head read, the pinned set, a pruned decode, decide,
    encode the Go response type."""
    after = observe.after(verb)  # audit, metric, tally: this verb's step, built once
    subject = verb.subject
    decides, encodes = _deciding_parts(verb)

    def decide(service: WorkerState, body: bytes) -> Reply:
        policy_set, env = policy_and_env(service, verb.name)
        request = verb.decode(body, policy_set.reads, env)
        if subject is not None and getattr(env, "head", None) is not None:  # the job in the snapshot?
            job_uid = subject(request).job_id
            if env.job(job_uid) is None:
                job_not_in_snapshot(service, verb.name, policy_set, env, job_uid)
        decision = decides(policy_set, request, env)
        outcome = verb.outcome(decision)
        after(service, policy_set, env, request, decision, outcome)
        return Reply(encodes(decision, request), decision=outcome, rule=getattr(decision, "rule", None) or "")
    return decide


def without_session(verb: Verb) -> Callable[[WorkerState, bytes], Reply]:
    """The handler of a verb of a scheduler without sessions (kube-scheduler's, ``kube_table``):
    the current policy set's rules for the verb's protocol (there is no session to pin a version:
    each call is answered by the set serving when it arrives), a decode, decide, encode; the call
    tallied in the protocol's window of time (``tallying.window_head``), its rejections counted
    per rule."""
    after = observe.after(verb)
    protocol = verb.protocol
    decides, encodes = _deciding_parts(verb)

    def decide(service: WorkerState, body: bytes) -> Reply:
        policy_set = current_policy(service).for_protocol(protocol)
        request = verb.decode(body, policy_set.reads, NO_SESSION)
        decision = decides(policy_set, request, NO_SESSION)
        outcome = verb.outcome(decision)
        after(service, policy_set, NO_SESSION, request, decision, outcome, window_head(protocol))
        counts = getattr(decision, "counts", None)
        if counts:
            metrics.note_decisions(verb.name, counts)
        return Reply(encodes(decision, request), decision=outcome)
    return decide


def decide_predicate(service: WorkerState, body: bytes) -> Reply:
    """``deciding(VERBS["predicate"])``, with the table's adapters for the predicate (decide,
    outcome, encode, subject) and its after step (``observe``: audit, metric, tally) written
    out: the predicate is called once per node per task, every other verb once per task or job
    at most, and each adapter is a Python call (about 330 instructions; 2.3k per call in all,
    callgrind). tests/decide/test_predicate_handler.py holds it to the generic handler's answers,
    tallies and metrics."""
    env = service.session_cache.env()
    kept = service.decided_with  # policy_and_env's first step, inlined
    policy_set, env = kept if kept[1] is env else policy_and_env(service, PREDICATE, env)
    request = decode.decode_predicate(body, policy_set.reads, env)
    task, node = request.task, request.node
    head = getattr(env, "head", None)
    if head is not None:
        try:
            job_uid = _TASK_JOB(task)  # task.job_id, read in C
        except AttributeError:  # not a decoded TaskView
            job_uid = task.job_id
        if env.job(job_uid) is None:
            job_not_in_snapshot(service, PREDICATE, policy_set, env, job_uid)
    decision = policy_set.predicate(task, node, env)
    audits = audit.predicate(policy_set, task, node, env) if policy_set.audited else ()
    if audits:
        metrics.note_audits(audits)
    service.tally.record_predicate(head, task, decision, audits)  # it reads the request id if it needs it
    if decision is FITS:  # every rule passed: one answer, built once
        return _FITS_REPLY
    if decision.fits:
        return Reply(encode.FITS, decision="", rule=decision.rule or "")
    constant = policy_set.rejections.get(decision.rule)  # a rule whose reason is constant
    if constant is not None and constant[0] is decision:
        return constant[1]
    return Reply(encode.predicate(decision), decision="reject", rule=decision.rule or "")


#: the answer to a predicate call every filter rule passed (``decisions.FITS``)
_FITS_REPLY = Reply(encode.FITS, decision="", rule="")
#: a decoded TaskView's job UID (``job_id``) in one C call
_TASK_JOB = operator.attrgetter("raw.Job")


#: verb kind -> handler(service, body) -> Reply, for every verb of the table.
HANDLERS: dict[str, Callable[[WorkerState, bytes], Reply]] = {
    name: _handler(verb) for name, verb in VERBS.items()}
HANDLERS[PREDICATE] = decide_predicate
HANDLERS.update((name, without_session(verb)) for name, verb in KUBE_VERBS.items())

#: verb kind -> its entry, for the verbs whose errors have a body of their own (``Verb.error_body``)
ANSWERS_ERRORS_ITSELF: dict[str, Verb] = {
    name: verb for name, verb in {**VERBS, **KUBE_VERBS}.items() if verb.error_body is not None}
