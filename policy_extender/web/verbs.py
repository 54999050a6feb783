"""One function per verb kind: body bytes in, Volcano's response bytes out.

Every deciding verb reads the session head once (through the worker's SessionCache), takes the
policy set *pinned* for that session (or the current one with no session), decodes the body
pruned to what that set reads, decides, and encodes the exact Go response type. onSessionOpen
stores the pruned snapshot pinned to the current version; the allocate/deallocate events record
the task in the shared store.
"""

from __future__ import annotations

import threading
from typing import Any, Callable

import orjson

from policy_extender.session.store import SessionLost
from policy_extender.wire import WireError
from policy_extender.wire import decode as wire_decode
from policy_extender.wire import encode, snapshot
from policy_extender.web import trace
from policy_extender.web.http import HttpError, Reply, check_content_type, read_body
from policy_extender.web.service import Service

EMPTY_OBJECT = b"{}"
#: the ``decision`` of a call refused by ``require_session`` (its log line is DEBUG, not ERROR)
NO_SESSION_DECISION = "no_session"


def read_request(service: Service, kind: str, environ: dict) -> bytes:
    """The body of one verb call, under the verb's limit; raises HttpError (415, 413, 400).

    An onSessionOpen body is decoded while it arrives (``wire.open_stream``), pruned to the
    current policy set's reads; ``on_session_open`` takes the result (``_streamed``)."""
    check_content_type(environ)
    limit, timeout = service.config.body_limit_for(kind), service.config.body_timeout
    if kind != "onSessionOpen" or service.policies.current is None:
        body = read_body(environ, limit, timeout)
        trace.mark("received")
        return body
    from policy_extender.wire.open_stream import OpenStream
    policy_set, streams = service.policies.current, []

    def consumer(buffer: Any) -> Callable[[int], bool]:
        streams.append(OpenStream(buffer, len(buffer), policy_set.reads))
        return streams[0].feed

    body = read_body(environ, limit, timeout, consumer)
    trace.mark("received")
    if streams:
        _streamed.open = (body, policy_set, streams[0])
    return body


#: this thread's onSessionOpen body decoded while it arrived: (body, policy set, OpenStream)
_streamed = threading.local()


def answer(service: Service, kind: str, body: bytes) -> Reply:
    """The reply to one verb call's body; raises HttpError for a non-200."""
    try:
        return HANDLERS[kind](service, body)
    except WireError as exc:
        raise HttpError(400, f"{kind}: {exc}") from None
    except SessionLost as exc:  # logged by the session cache, once per occurrence
        raise HttpError(503, f"{kind}: {exc}") from None
    except SessionRequired as exc:  # logged once per cycle by session_gaps, not once per call
        return Reply(orjson.dumps({"error": exc.message}), 500, NO_SESSION_DECISION)


def policy_and_env(service: Service, kind: str) -> tuple[Any, Any]:
    """The policy set and Env of this call: one head() read, one policy version per cycle.

    A call with no session open is counted and logged (web/session_gaps.py); with
    ``require_session`` it is answered 500 when the set's ``kind`` rules read session data."""
    env = service.session_cache.env()
    head = getattr(env, "head", None)
    gaps = service.session_gaps
    if head is None:
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
    return service.policies.pinned(head.policy_version, service.sessions.policy_sources), env


def check_job_in_snapshot(service: Service, kind: str, policy_set: Any, env: Any, task: Any) -> None:
    """Count (and with ``require_session`` refuse) a task whose job the open snapshot lacks."""
    head = getattr(env, "head", None)
    if head is None:
        return
    job_uid = task.job_id
    if env.job(job_uid) is not None:
        return
    if service.session_gaps is not None:
        service.session_gaps.job_not_in_snapshot(kind, head.session_id, job_uid)
    if service.config.require_session and kind in policy_set.session_verbs:
        raise SessionRequired(kind, f"the task's job {job_uid or '(none)'} is not in the open "
                              "session's snapshot (see docs/operations.md, \"Calls without a session\")")


class SessionRequired(HttpError):
    """``require_session``: a 500, so that Volcano's ``extender.ignorable`` decides."""

    def __init__(self, kind: str, why: str) -> None:
        super().__init__(500, f"{kind}: {why}, and the policies' {kind} rules read session data; "
                         "require_session is on, so this call is refused and Volcano's "
                         "extender.ignorable decides")


def current_policy(service: Service) -> Any:
    policy_set = service.policies.current
    if policy_set is None:
        errors = "; ".join(service.policy_status.errors) or "not loaded yet"
        raise HttpError(503, f"no policy set is loaded ({errors}); fix the policy files, "
                        "the service reloads them by itself")
    return policy_set


# ---------------------------------------------------------------------------------------------
# session


def on_session_open(service: Service, body: bytes) -> Reply:
    streamed, _streamed.open = getattr(_streamed, "open", None), None
    if streamed is not None and streamed[0] is body:  # decoded while it arrived: the rest now
        policy_set, stream = streamed[1], streamed[2]
        trace.note("decode_while_receiving", stream.busy)
        trace.note("pieces", stream.pieces)
        pruned = stream.finish()
    else:
        policy_set = current_policy(service)
        pruned = snapshot.decode_open_body(body, policy_set.reads)
    trace.mark("decoded")
    data = snapshot.encode_snapshot(pruned)
    del pruned, streamed
    trace.mark("encoded")
    before = service.sessions.session_counts()
    service.sessions.open(data, policy_set.version, dict(policy_set.sources))
    trace.mark("stored")
    _count_session("opened")
    _count_ended_unclosed(service, before)
    return Reply(EMPTY_OBJECT, rule=policy_set.version)


def on_session_close(service: Service, body: bytes) -> Reply:
    wire_decode.decode_session_close(body)  # not a JSON object: 400, the session stays open
    had_session = service.sessions.head() is not None
    before = service.sessions.session_counts()
    service.sessions.close()
    if had_session:
        _count_session("closed")
    _count_ended_unclosed(service, before)
    return Reply(EMPTY_OBJECT)


def _count_ended_unclosed(service: Service, before) -> None:
    """Sessions whose close never came: the store notices them at the next open or close
    (``expired`` after the TTL, ``replaced`` by a new open first); once per cycle, two reads."""
    after = service.sessions.session_counts()
    for event in ("expired", "replaced"):
        for _ in range(max(0, getattr(after, event) - getattr(before, event))):
            _count_session(event)


def _count_session(event: str) -> None:
    from policy_extender import metrics
    metrics.count_session(event)


# ---------------------------------------------------------------------------------------------
# decisions


def predicate(service: Service, body: bytes) -> Reply:
    policy_set, env = policy_and_env(service, "predicate")
    request = wire_decode.decode_predicate(body, policy_set.reads, env)
    check_job_in_snapshot(service, "predicate", policy_set, env, request.task)
    decision = policy_set.predicate(request.task, request.node, env)
    return Reply(encode.predicate(decision), decision="" if decision.fits else "reject",
                 rule=decision.rule or "")


def prioritize(service: Service, body: bytes) -> Reply:
    policy_set, env = policy_and_env(service, "prioritize")
    request = wire_decode.decode_prioritize(body, policy_set.reads, env)
    check_job_in_snapshot(service, "prioritize", policy_set, env, request.task)
    decision = policy_set.prioritize(request.task, request.nodes, env)
    return Reply(encode.prioritize(decision, request.nodes))


def victims(kind: str) -> Callable[[Service, bytes], Reply]:
    def decide(service: Service, body: bytes) -> Reply:
        policy_set, env = policy_and_env(service, kind)
        request = wire_decode.decode_victims(body, policy_set.reads, env)
        check_job_in_snapshot(service, kind, policy_set, env, request.evictor)
        decision = policy_set.victims(kind, request.evictor, request.evictees, env)
        outcome = {1: "evict", -1: "reject"}.get(decision.status, "")
        return Reply(encode.victims(decision, request.raw_evictees), decision=outcome)
    return decide


def job_enqueueable(service: Service, body: bytes) -> Reply:
    policy_set, env = policy_and_env(service, "jobEnqueueable")
    request = wire_decode.decode_job(body, policy_set.reads, env)
    decision = policy_set.enqueueable(request.job, env)
    outcome = {1: "permit", -1: "reject"}.get(decision.status, "abstain")
    return Reply(encode.enqueueable(decision), decision=outcome, rule=decision.rule or "")


def job_enqueued(service: Service, body: bytes) -> Reply:
    wire_decode.decode_job(body)  # validated, nothing to decide
    return Reply(EMPTY_OBJECT)


def queue_overused(service: Service, body: bytes) -> Reply:
    policy_set, env = policy_and_env(service, "queueOverused")
    request = wire_decode.decode_queue(body, policy_set.reads, env)
    decision = policy_set.overused(request.queue, env)
    outcome = "overused" if decision.value else "not_overused"
    return Reply(encode.overused(decision), decision=outcome, rule=decision.rule or "")


def job_ready(service: Service, body: bytes) -> Reply:
    policy_set, env = policy_and_env(service, "jobReady")
    request = wire_decode.decode_job(body, policy_set.reads, env)
    decision = policy_set.ready(request.job, env)
    outcome = "ready" if decision.value else "not_ready"
    return Reply(encode.ready(decision), decision=outcome, rule=decision.rule or "")


# ---------------------------------------------------------------------------------------------
# events


def allocate(service: Service, body: bytes) -> Reply:
    """Record the task's allocation in the open session (net, retries are safe: store.py)."""
    return _event(service, body, "allocate")


def deallocate(service: Service, body: bytes) -> Reply:
    """Record that the task's allocation was undone, or that a task running before the cycle was
    evicted (it then counts -1 on its node, job and queue)."""
    return _event(service, body, "deallocate")


def _event(service: Service, body: bytes, kind: str) -> Reply:
    """An event the store cannot record is an error (5xx): Volcano then decides by
    ``extender.ignorable`` instead of the event silently missing from this cycle's counts."""
    from policy_extender.session.allocation import AllocationRecord, encode_allocation
    task = wire_decode.decode_task_event(body).task
    head = service.sessions.head()
    if head is None:
        if service.session_gaps is not None:
            service.session_gaps.no_session(f"{kind}Func")
        raise HttpError(503, f"{kind}Func: no session is open in the session store (onSessionOpen "
                        "failed or timed out, or the store lost it): the event cannot be counted")
    record = encode_allocation(AllocationRecord(task.uid or "", task.job_id or "", task.node_name or "",
                                                task.requests.as_dict()))
    store = getattr(service.sessions, kind)
    if not store(head.session_id, task.uid or "", record):
        raise HttpError(503, f"{kind}Func: session {head.session_id} ended while the event was "
                        "recorded: the event was not counted")
    return Reply(encode.event())


HANDLERS: dict[str, Callable[[Service, bytes], Reply]] = {
    "onSessionOpen": on_session_open,
    "onSessionClose": on_session_close,
    "predicate": predicate,
    "prioritize": prioritize,
    "preemptable": victims("preemptable"),
    "reclaimable": victims("reclaimable"),
    "jobEnqueueable": job_enqueueable,
    "jobEnqueued": job_enqueued,
    "queueOverused": queue_overused,
    "jobReady": job_ready,
    "allocateFunc": allocate,
    "deallocateFunc": deallocate,
}
