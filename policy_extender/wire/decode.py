"""Decoders for every verb's request body, pruned to a policy set's read set, into views.

``decode_predicate(body, reads, env)`` and friends take the raw body bytes (never ``json.loads``:
msgspec skips every key the read set does not name), and return the verb's views. A body that is
not a JSON object, lacks a field Volcano always sends and the service keys on (``structs.REQUIRED``),
or has a wrong JSON type in a field we read, raises ``WireError`` with the path.
Decoders are built once per read set (a policy version has one) and cached.
"""

from __future__ import annotations

from dataclasses import dataclass

import msgspec

from policy_extender import trace
from policy_extender.errors import WireError
from . import arriving, node_reuse
from .paths import EVENT_READ
from .reading import FrozenReads, Reads, built_once, decode_json, freeze_reads, required, struct_of
from .structs import struct_for
from .session_views import NO_SESSION, PlacedTask
from .snapshot import Snapshot, allocation_in, decode_session_open
from .views import JobView, NodeView, QueueView, TaskView

__all__ = ["decode_predicate", "decode_prioritize", "decode_victims", "decode_job", "decode_queue",
           "decode_task_event", "decode_session_open", "decode_session_close", "decode_placed_task",
           "WireError", "PredicateRequest", "PrioritizeRequest", "VictimsRequest", "JobRequest",
           "QueueRequest", "TaskEventRequest"]


# ---------------------------------------------------------------- request types

@dataclass(frozen=True, slots=True)
class PredicateRequest:
    task: TaskView
    node: NodeView


@dataclass(frozen=True, slots=True)
class PrioritizeRequest:
    task: TaskView
    nodes: list[NodeView]


@dataclass(frozen=True, slots=True)
class VictimsRequest:
    """preemptable / reclaimable: ``raw_evictees[i]`` is the exact JSON of ``evictees[i]``."""

    evictor: TaskView
    evictees: list[TaskView]
    raw_evictees: list[msgspec.Raw]


@dataclass(frozen=True, slots=True)
class JobRequest:
    job: JobView


@dataclass(frozen=True, slots=True)
class QueueRequest:
    queue: QueueView


@dataclass(frozen=True, slots=True)
class TaskEventRequest:
    task: TaskView


# ---------------------------------------------------------------- body structs (cached)

def _body(name: str, **fields) -> type:
    return msgspec.defstruct(name, [(k, t | None, None) for k, t in fields.items()],
                             forbid_unknown_fields=False)


@built_once
def _predicate_decoder(frozen: FrozenReads):
    body = _body("PredicateBody", task=struct_of(frozen, "task"), node=struct_of(frozen, "node"))
    return msgspec.json.Decoder(body)


@built_once
def _part_decoders(frozen: FrozenReads):
    """``{"task": …}`` and a node alone: the parts ``node_reuse`` splits a predicate body into,
    and a prioritize body (its task, and each node element it does not find kept)."""
    task_only = _body("PredicateTaskPart", task=struct_of(frozen, "task"))
    return msgspec.json.Decoder(task_only), msgspec.json.Decoder(struct_of(frozen, "node") | None)


@built_once
def prioritize_body_decoder(frozen: FrozenReads):
    """The whole prioritize body's decoder (``wire.prioritize_stream`` falls back to it)."""
    node = struct_of(frozen, "node")
    body = _body("PrioritizeBody", task=struct_of(frozen, "task"), nodes=list[node | None])  # type: ignore[valid-type]  # a Struct built at run time
    return msgspec.json.Decoder(body)


@built_once
def _victims_decoders(frozen: FrozenReads):
    task = struct_of(frozen, "task")
    body = _body("VictimsBody", evictor=task, evictees=list[msgspec.Raw])
    return msgspec.json.Decoder(body), msgspec.json.Decoder(task | None)


@built_once
def _job_decoder(frozen: FrozenReads):
    return msgspec.json.Decoder(_body("JobBody", job=struct_of(frozen, "job")))


@built_once
def _queue_decoder(frozen: FrozenReads):
    return msgspec.json.Decoder(_body("QueueBody", queue=struct_of(frozen, "queue")))


@built_once
def _task_decoder(frozen: FrozenReads):
    task = struct_for("task", dict(frozen)["task"], frozenset(EVENT_READ))  # the status too: the record keeps it
    return msgspec.json.Decoder(_body("TaskEventBody", task=task))


def prepare(reads: Reads | None) -> None:
    """Build every verb's decoder for ``reads`` now (when a policy set goes live), so no request
    pays for it and no two request threads build one at once."""
    frozen = freeze_reads(reads)
    for factory in (_predicate_decoder, _part_decoders, prioritize_body_decoder, _victims_decoders, _job_decoder,
                    _queue_decoder, _task_decoder):
        factory(frozen)


# ---------------------------------------------------------------- decoders per verb

def decode_predicate(body: bytes, reads: Reads | None = None, env=NO_SESSION) -> PredicateRequest:
    """``{"task": TaskInfo, "node": NodeInfo}``; a node whose bytes this worker decoded before
    is not decoded again (``wire.node_reuse``: the same result, or the whole body is decoded)."""
    frozen = freeze_reads(reads)
    parts = node_reuse.split_decode(body, frozen, *_part_decoders(frozen))
    trace.note("node_reused", node_reuse.last_reused())
    if parts is None:
        decoded = decode_json(_predicate_decoder(frozen), body)
        parts = decoded.task, decoded.node
    return PredicateRequest(TaskView(required(parts[0], "$.task"), env),
                            NodeView(required(parts[1], "$.node"), env))


def decode_prioritize(body: bytes, reads: Reads | None = None, env=NO_SESSION) -> PrioritizeRequest:
    """``{"task": TaskInfo, "nodes": [NodeInfo]}``; null nodes read as none.

    A body the body reader decoded while it arrived (``wire.prioritize_stream``, handed over
    through ``wire.arriving``) is finished from there when it was read for the same read set.
    Otherwise the nodes this worker kept from predicate bodies are taken as they are
    (``wire.node_reuse.split_decode_nodes``: the same result, or the whole body is decoded)."""
    frozen = freeze_reads(reads)
    streamed = arriving.take(body)
    stream = streamed[1] if streamed is not None else None
    if stream is not None and getattr(stream, "verb", None) == "prioritize" and stream.frozen == frozen \
            and stream.covered:  # a stream that covered nothing yet gains nothing over the paths below
        task, found = stream.finish()
        trace.note("decode_while_receiving", stream.busy)
        trace.note("pieces", stream.pieces)
        trace.note("nodes_reused", stream.reused if stream.state != "off" else 0)
    else:
        parts = node_reuse.split_decode_nodes(body, frozen, *_part_decoders(frozen))
        trace.note("nodes_reused", node_reuse.last_reused())
        if parts is None:
            decoded = decode_json(prioritize_body_decoder(frozen), body)
            parts = decoded.task, decoded.nodes
        task, found = parts
    nodes = [NodeView(n, env) for n in found or () if n is not None]
    return PrioritizeRequest(TaskView(required(task, "$.task"), env), nodes)


def decode_victims(body: bytes, reads: Reads | None = None, env=NO_SESSION) -> VictimsRequest:
    """preemptable / reclaimable ``{"evictor": TaskInfo, "evictees": [TaskInfo]}``.

    Evictees are kept as raw bytes too (``raw_evictees``) so victims are echoed byte for byte.
    A null evictee is dropped from both lists.
    """
    body_decoder, task_decoder = _victims_decoders(freeze_reads(reads))
    decoded = decode_json(body_decoder, body)
    evictees, raws = [], []
    for i, raw in enumerate(decoded.evictees or ()):
        task = decode_json(task_decoder, raw, f"$.evictees[{i}]")
        if task is not None:
            evictees.append(TaskView(task, env))
            raws.append(raw)
    return VictimsRequest(TaskView(required(decoded.evictor, "$.evictor"), env), evictees, raws)


def decode_job(body: bytes, reads: Reads | None = None, env=NO_SESSION) -> JobRequest:
    """jobEnqueueable / jobEnqueued / jobReady ``{"job": JobInfo}``."""
    decoded = decode_json(_job_decoder(freeze_reads(reads)), body)
    return JobRequest(JobView(required(decoded.job, "$.job"), env))


def decode_queue(body: bytes, reads: Reads | None = None, env=NO_SESSION) -> QueueRequest:
    """queueOverused ``{"queue": QueueInfo}``."""
    decoded = decode_json(_queue_decoder(freeze_reads(reads)), body)
    return QueueRequest(QueueView(required(decoded.queue, "$.queue"), env))


def decode_task_event(body: bytes, reads: Reads | None = None, env=NO_SESSION) -> TaskEventRequest:
    """allocateFunc / deallocateFunc ``{"task": TaskInfo}``."""
    decoded = decode_json(_task_decoder(freeze_reads(reads)), body)
    return TaskEventRequest(TaskView(required(decoded.task, "$.task"), env))


_CLOSE_DECODER = msgspec.json.Decoder(msgspec.defstruct("SessionCloseBody", [], forbid_unknown_fields=False))


def decode_session_close(body: bytes) -> None:
    """onSessionClose: Volcano sends ``{}``. Any JSON object is accepted (its keys are skipped);
    anything else (not JSON, empty, an array, a number, null) raises ``WireError``, so that a
    stray request never closes the live session."""
    decode_json(_CLOSE_DECODER, body)


def decode_placed_task(body: bytes, reads: Reads | None = None, snapshot: Snapshot | None = None) -> PlacedTask:
    """allocateFunc body -> ``PlacedTask(task_uid, job_uid, queue_name, node_name, resources)``,
    the queue looked up in ``snapshot`` (empty when the job is unknown or there is none)."""
    task = decode_task_event(body, reads).task
    return allocation_in(task, snapshot if snapshot is not None else NO_SESSION)
