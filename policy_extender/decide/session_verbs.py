"""The verbs that decide nothing: the session's open and close, ``jobEnqueued``, and the
allocate/deallocate events that the shared session store counts (net, retries are safe).

Opens are ordered by arrival, not by when they are stored: an onSessionOpen takes a ticket from
the store as it arrives (``note_arrival``, called by the HTTP layer before the body is read; else
at the start of the handler), and the store refuses to store it once an open or close that
arrived later was stored (``OpenSuperseded``: answered 409 and counted as a ``superseded``
session event). So an open Volcano gave up on (``extender.httpTimeout``) that finishes after the
next cycle's close and open never replaces that cycle's session.
"""

from __future__ import annotations

import threading
from typing import Any

from policy_extender import metrics, trace
from policy_extender.decide.worker_state import LoadedSet, WorkerState
from policy_extender.decide.reply import Reply, VerbError
from policy_extender.session.allocation import AllocationRecord, encode_allocation
from policy_extender.session.store import Head, OpenSuperseded, SessionCounts
from policy_extender.wire import decode as wire_decode
from policy_extender.wire import arriving, encode, placed, snapshot
from policy_extender.wire.paths import PLACED

EMPTY_OBJECT = b"{}"


def current_policy(service: WorkerState) -> Any:
    policy_set = service.policies.current
    if policy_set is None:
        errors = "; ".join(service.policy_status.errors) or "not loaded yet"
        raise VerbError(503, f"no policy set is loaded ({errors}); fix the policy files, "
                         "the service reloads them by itself")
    return policy_set


#: this thread's onSessionOpen's arrival ticket (``note_arrival``), or None
_arrival = threading.local()


def note_arrival(service: WorkerState) -> None:
    """An onSessionOpen has just arrived on this thread, its body not read yet: take its ticket
    (``SessionStore.begin_open``) for this thread's handler. A store that cannot give one now
    leaves it to the handler, which then fails the call as the store does. Pair with
    :func:`forget_arrival` once the call is answered."""
    try:
        _arrival.ticket = service.sessions.begin_open()
    except Exception:  # the store is down: the handler's own begin_open answers 503 for it
        _arrival.ticket = None


def forget_arrival() -> None:
    """The call is answered: a ticket no handler took (a body refused) is not the next call's."""
    _arrival.ticket = None


def _arrival_ticket(service: WorkerState) -> int:
    ticket, _arrival.ticket = getattr(_arrival, "ticket", None), None
    return ticket if ticket is not None else service.sessions.begin_open()


def on_session_open(service: WorkerState, body: bytes) -> Reply:
    ticket = _arrival_ticket(service)
    streamed = arriving.take(body)
    if streamed is not None:  # decoded while it arrived (web.dispatch.read_streamed): the rest now
        policy_set, stream = streamed
        trace.note("decode_while_receiving", stream.busy)
        trace.note("pieces", stream.pieces)
        pruned = stream.finish()
        trace.note("nodes_reused", stream.reused if stream.state != "off" else 0)
        trace.note("jobs_reused", stream.jobs_reused if stream.state != "off" else 0)
    else:
        policy_set = current_policy(service)
        pruned = snapshot.decode_open_body(body, policy_set.reads)
    trace.mark("decoded")
    data = snapshot.encode_snapshot(pruned, policy_set.reads)
    del pruned, streamed
    trace.mark("encoded")
    before = service.sessions.session_counts()
    try:
        service.sessions.open(data, policy_set.version, dict(policy_set.sources), ticket)
    except OpenSuperseded as exc:
        _count_session("superseded")
        raise VerbError(409, f"onSessionOpen: {exc} (it took longer than Volcano waited: Volcano closed "
                        "that cycle and opened the next before it was stored)") from None
    service.session_cache.session_opened()  # a session lost before is not the cycle's any more
    trace.mark("stored")
    if service.tally.enabled:  # the cycle's tally, even if nothing is decided in it
        head = service.sessions.head()
        service.tally.record_open(head)
        _report_rules_not_called(service, policy_set, head.session_id if head is not None else None)
    _count_session("opened")
    _count_ended_unclosed(service, before)
    return Reply(EMPTY_OBJECT, rule=policy_set.version)


def on_session_close(service: WorkerState, body: bytes) -> Reply:
    wire_decode.decode_session_close(body)  # not a JSON object: 400, the session stays open
    had_session = service.sessions.head() is not None
    before = service.sessions.session_counts()
    service.sessions.close()
    if had_session:
        _count_session("closed")
    _count_ended_unclosed(service, before)
    return Reply(EMPTY_OBJECT)


def _report_rules_not_called(service: WorkerState, policy_set: LoadedSet, open_cycle: str | None) -> None:
    """Rules whose verb Volcano has not called in the last cycles: log and metric (decide.unserved)."""
    watch = getattr(service, "unserved", None)
    if watch is not None:
        watch.update_soon(policy_set, service.tally, metrics.set_rules_not_called, open_cycle)


def _count_ended_unclosed(service: WorkerState, before: SessionCounts) -> None:
    """Sessions whose close never came: the store notices them at the next open or close
    (``expired`` after the TTL, ``replaced`` by a new open first); once per cycle, two reads."""
    after = service.sessions.session_counts()
    for event in ("expired", "replaced"):
        for _ in range(max(0, getattr(after, event) - getattr(before, event))):
            _count_session(event)


def _count_session(event: str) -> None:
    metrics.count_session(event)


def _cycle_reads(service: WorkerState, head: Head | None) -> Any:
    """The read set of the policy set deciding this cycle: the one the open session is pinned to,
    the current one with no session (the event is then refused, after its body is checked)."""
    if head is None:
        current = service.policies.current
        return current.reads if current is not None else None
    try:
        return service.policies.pinned(head.policy_version, service.sessions.policy_sources).reads
    except LookupError:  # policyset.UnknownPolicyVersion: the deciding verbs answer 500 for it;
        return None      # the event is still counted, its identity fields checked


def job_enqueued(service: WorkerState, body: bytes) -> Reply:
    wire_decode.decode_job(body)  # validated, nothing to decide
    return Reply(EMPTY_OBJECT)


def allocate(service: WorkerState, body: bytes) -> Reply:
    """Record the task's allocation in the open session (net, retries are safe: store.py)."""
    return _event(service, body, "allocate")


def deallocate(service: WorkerState, body: bytes) -> Reply:
    """Record that the task's allocation was undone, or that a task running before the cycle was
    evicted (it then counts -1 on its node, job and queue)."""
    return _event(service, body, "deallocate")


def _event(service: WorkerState, body: bytes, kind: str) -> Reply:
    """An event the store cannot record is an error (5xx): Volcano then decides by
    ``extender.ignorable`` instead of the event silently missing from this cycle's counts.
    The task is decoded with the read set of the rules deciding the cycle, so that what they read
    of a task is required of it here too (wire.structs.GO_KEYS), as in every other verb."""
    head = service.sessions.head()
    reads = _cycle_reads(service, head)
    task = wire_decode.decode_task_event(body, reads).task
    if head is None:
        if service.session_gaps is not None:
            service.session_gaps.no_session(f"{kind}Func")
        raise VerbError(503, f"{kind}Func: no session is open in the session store (onSessionOpen "
                        "failed or timed out, or the store lost it): the event cannot be counted")
    # floats, as the record declares: Go's float64 amounts in whole units can be integral past
    # 2**64 (a 1e308 milli amount), which an int in msgpack cannot hold (was a 500)
    resources = {name: float(amount) for name, amount in task.requests.as_dict().items()}
    # the task as this cycle's views read it (session.allocations, cluster.nodes[].tasks)
    kept = placed.kept_task(task.raw, reads.get(PLACED) if reads is not None else None)
    record = encode_allocation(AllocationRecord(task.uid or "", task.job_id or "", task.node_name or "",
                                                resources, placed.status_of(task.raw), kept))
    store = getattr(service.sessions, kind)
    if not store(head.session_id, task.uid or "", record):
        raise VerbError(503, f"{kind}Func: session {head.session_id} ended while the event was "
                        "recorded: the event was not counted")
    return Reply(encode.event())
