"""The session snapshot: onSessionOpen pruned to the job and queue read sets, as compact msgpack.

onSessionOpen carries the whole cluster (18 MB to 268 MB); policies only ever look up jobs (by
``task.Job``) and queues (by ``job.Queue``) in it. ``from_open_body`` decodes just the read
fields of ``Jobs`` and ``Queues`` and encodes them as msgpack bytes for the shared session store;
``load_snapshot`` turns those bytes (in any worker) into a ``Snapshot`` of views.
"""

from __future__ import annotations

from typing import NamedTuple

import msgspec

from .reading import FrozenReads, Reads, built_once, decode_json, freeze_reads, struct_of
from .resources import Resources
from .session_views import NO_SESSION, PlacedTask
from .views import JobView, QueueView, TaskView

_MSGPACK = msgspec.msgpack.Encoder()


class AnyObject(msgspec.Struct, forbid_unknown_fields=False):
    """Any JSON object, its keys skipped unparsed: how a node of onSessionOpen is checked."""


@built_once
def open_body_decoder(frozen: FrozenReads) -> msgspec.json.Decoder:
    """``Jobs``, ``Nodes`` and ``Queues`` required as objects (Volcano's session always has the
    three maps, made non-nil, so they are never null; empty is a cluster with none): an open
    without them would replace the live session with an empty one. A node is only checked to be
    an object or null, its keys skipped (the snapshot does not keep nodes)."""
    job, queue = struct_of(frozen, "job"), struct_of(frozen, "queue")
    fields = [("Jobs", dict[str, job | None]), ("Nodes", dict[str, AnyObject | None]),  # type: ignore[valid-type]  # a Struct built at run time
              ("Queues", dict[str, queue | None])]  # type: ignore[valid-type]  # as above
    return msgspec.json.Decoder(msgspec.defstruct("SessionOpenBody", fields))


def decode_open_body(body: bytes, reads: Reads | None = None):
    """The onSessionOpen body's ``Jobs`` and ``Queues``, pruned (a Struct; Nodes only checked)."""
    return decode_json(open_body_decoder(freeze_reads(reads)), body)


def encode_snapshot(pruned) -> bytes:
    """Compact msgpack of a pruned onSessionOpen's jobs and queues (Go keys, nulls omitted)."""
    return _MSGPACK.encode({"Jobs": pruned.Jobs, "Queues": pruned.Queues})


def from_open_body(body: bytes, reads: Reads | None = None) -> bytes:
    """onSessionOpen body -> the snapshot bytes the session store keeps."""
    return encode_snapshot(decode_open_body(body, reads))


class Snapshot:
    """Jobs by UID and queues by name (and UID), as views bound to this snapshot so that
    ``job.queue`` resolves; also usable as an Env of its own (open, zero counts)."""

    open = True

    def __init__(self, jobs: dict | None, queues: dict | None):
        self.jobs = {_key(raw, "UID", uid): JobView(raw, self) for uid, raw in (jobs or {}).items() if raw is not None}
        self.queues = {_key(raw, "Name", key): QueueView(raw, self) for key, raw in (queues or {}).items() if raw is not None}
        self._queues_by_uid = {view.uid: view for view in self.queues.values() if view.uid}
        if "" not in self.jobs:  # job() in one C call (once per predicate): "" is then no key either
            self.job = self.jobs.get  # type: ignore[method-assign, assignment]  # the bound dict.get

    def job(self, uid: str):
        return self.jobs.get(uid) if uid else None

    def queue(self, name: str):
        if not name:
            return None
        return self.queues.get(name) or self._queues_by_uid.get(name)

    def session_view(self, job_uid, queue_name, node_name):
        return NO_SESSION.session_view(job_uid, queue_name, node_name)

    def __repr__(self) -> str:
        return f"Snapshot({len(self.jobs)} jobs, {len(self.queues)} queues)"


def _key(raw, attribute: str, fallback: str) -> str:
    value = raw.get(attribute) if isinstance(raw, dict) else getattr(raw, attribute, None)
    return value or fallback


def load_snapshot(data: bytes) -> Snapshot:
    """Snapshot bytes (from ``from_open_body``, any worker, any read set) -> ``Snapshot``."""
    decoded = msgspec.msgpack.decode(data) or {}
    return Snapshot(decoded.get("Jobs"), decoded.get("Queues"))


def decode_session_open(body: bytes, reads: Reads | None = None) -> Snapshot:
    """onSessionOpen body -> ``Snapshot`` directly (what a worker would load from the store)."""
    pruned = decode_open_body(body, reads)
    return Snapshot(pruned.Jobs, pruned.Queues)


class TaskAllocation(NamedTuple):
    """What an allocateFunc event records: resources in whole units by full resource name."""

    task_uid: str
    job_uid: str
    node_name: str
    resources: dict[str, int | float]


def allocation_from_task(task: TaskView) -> TaskAllocation:
    """The allocation an allocate/deallocate event's task stands for."""
    requests: Resources = task.requests
    return TaskAllocation(task.uid or "", task.job_id or "", task.node_name or "", requests.as_dict())


def allocation_in(task: TaskView, snapshot) -> PlacedTask:
    """The task's allocation with its queue looked up in ``snapshot`` (an Env or Snapshot)."""
    job = snapshot.job(task.job_id) if task.job_id else None
    queue_name = (job.queue_name if job is not None else None) or ""
    found = allocation_from_task(task)
    return PlacedTask(found.task_uid, found.job_uid, queue_name, found.node_name, found.resources)
