"""The session snapshot: onSessionOpen pruned to the read sets, as compact msgpack.

onSessionOpen carries the whole cluster (18 MB to 268 MB); policies look up jobs (by
``task.Job``) and queues (by ``job.Queue``) in it, and read its cluster-wide facts through the
``cluster`` root (``wire.cluster``). ``from_open_body`` decodes just the read fields of ``Jobs``
and ``Queues``, and of ``Nodes`` only when a loaded rule reads a node fact of ``cluster`` (the
read set's ``cluster`` paths under ``Nodes``: otherwise nodes are only checked and the snapshot
keeps none), and encodes them as msgpack bytes for the shared session store; ``load_snapshot``
turns those bytes (in any worker) into a ``Snapshot`` of views.
"""

from __future__ import annotations

from typing import NamedTuple

import msgspec

from .cluster import ClusterFacts, ClusterView
from .reading import FrozenReads, Reads, built_once, decode_json, freeze_reads, struct_of
from .resources import Resources
from .session_views import NO_SESSION, PlacedTask
from .structs import attr_name
from .views import JobView, NodeView, QueueView, TaskView

_MSGPACK = msgspec.msgpack.Encoder()


class AnyObject(msgspec.Struct, forbid_unknown_fields=False):
    """Any JSON object, its keys skipped unparsed: how a node of onSessionOpen is checked."""


def node_keys(frozen: FrozenReads) -> tuple[str, ...] | None:
    """The keys of a node the snapshot keeps (those the ``cluster`` reads need, and ``Name``),
    or None when no rule reads a node fact of ``cluster``: the snapshot then keeps no node."""
    cluster = dict(frozen).get("cluster", frozenset())
    if not any(path[:1] == ("Nodes",) for path in cluster):
        return None
    return tuple(sorted({"Name", *(path[2] for path in cluster if path[:2] == ("Nodes", "*") and len(path) > 2)}))


def node_struct(frozen: FrozenReads) -> type:
    """What a node of onSessionOpen decodes to: the predicate's node Struct when the snapshot
    keeps nodes (so the nodes a worker kept from predicates are taken as they are), else only
    checked to be an object."""
    return struct_of(frozen, "node") if node_keys(frozen) is not None else AnyObject


@built_once
def open_body_decoder(frozen: FrozenReads) -> msgspec.json.Decoder:
    """``Jobs``, ``Nodes`` and ``Queues`` required as objects (Volcano's session always has the
    three maps, made non-nil, so they are never null; empty is a cluster with none): an open
    without them would replace the live session with an empty one. A node is only checked to be
    an object or null, its keys skipped, unless the snapshot keeps nodes (``node_keys``)."""
    job, queue, node = struct_of(frozen, "job"), struct_of(frozen, "queue"), node_struct(frozen)
    fields = [("Jobs", dict[str, job | None]), ("Nodes", dict[str, node | None]),  # type: ignore[valid-type]  # a Struct built at run time
              ("Queues", dict[str, queue | None])]  # type: ignore[valid-type]  # as above
    return msgspec.json.Decoder(msgspec.defstruct("SessionOpenBody", fields))


def decode_open_body(body: bytes, reads: Reads | None = None):
    """The onSessionOpen body's ``Jobs``, ``Queues`` and (``node_keys``) ``Nodes``, pruned (a
    Struct; Nodes otherwise only checked)."""
    return decode_json(open_body_decoder(freeze_reads(reads)), body)


def encode_snapshot(pruned, reads: Reads | None = None) -> bytes:
    """Compact msgpack of a pruned onSessionOpen's jobs and queues, and of its nodes' keys that
    the ``cluster`` reads need when the snapshot keeps nodes (Go keys, nulls omitted)."""
    kept = {"Jobs": pruned.Jobs, "Queues": pruned.Queues}
    keys = node_keys(freeze_reads(reads))
    if keys is not None:
        attrs = [(key, attr_name(key)) for key in keys]
        kept["Nodes"] = {name: None if node is None else
                         {key: value for key, attr in attrs if (value := getattr(node, attr, None)) is not None}
                         for name, node in pruned.Nodes.items()}
    return _MSGPACK.encode(kept)


def from_open_body(body: bytes, reads: Reads | None = None) -> bytes:
    """onSessionOpen body -> the snapshot bytes the session store keeps."""
    return encode_snapshot(decode_open_body(body, reads), reads)


class Snapshot:
    """Jobs by UID and queues by name (and UID), as views bound to this snapshot so that
    ``job.queue`` resolves, and the raw nodes it keeps; also usable as an Env of its own (open,
    zero counts)."""

    open = True

    def __init__(self, jobs: dict | None, queues: dict | None, nodes: dict | None = None):
        self.jobs = {_key(raw, "UID", uid): JobView(raw, self) for uid, raw in (jobs or {}).items() if raw is not None}
        self.queues = {_key(raw, "Name", key): QueueView(raw, self) for key, raw in (queues or {}).items() if raw is not None}
        self._queues_by_uid = {view.uid: view for view in self.queues.values() if view.uid}
        self.nodes = nodes
        self._cluster: ClusterFacts | None = None
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

    def cluster_facts(self) -> ClusterFacts:
        """The snapshot's cluster-wide facts, computed on first use (once per snapshot)."""
        facts = self._cluster
        if facts is None:
            nodes = (NodeView(raw, self) for raw in (self.nodes or {}).values() if raw is not None)
            facts = self._cluster = ClusterFacts(nodes, self.queues, self.jobs.values())
        return facts

    def cluster_view(self) -> ClusterView:
        """The ``cluster`` root with no allocation of this cycle (the snapshot as an Env)."""
        return self.cluster_facts().view()

    def __repr__(self) -> str:
        return f"Snapshot({len(self.jobs)} jobs, {len(self.queues)} queues)"


def _key(raw, attribute: str, fallback: str) -> str:
    value = raw.get(attribute) if isinstance(raw, dict) else getattr(raw, attribute, None)
    return value or fallback


def load_snapshot(data: bytes) -> Snapshot:
    """Snapshot bytes (from ``from_open_body``, any worker, any read set) -> ``Snapshot``."""
    decoded = msgspec.msgpack.decode(data) or {}
    return Snapshot(decoded.get("Jobs"), decoded.get("Queues"), decoded.get("Nodes"))


def decode_session_open(body: bytes, reads: Reads | None = None) -> Snapshot:
    """onSessionOpen body -> ``Snapshot`` directly (what a worker would load from the store)."""
    pruned = decode_open_body(body, reads)
    return Snapshot(pruned.Jobs, pruned.Queues, pruned.Nodes if node_keys(freeze_reads(reads)) is not None else None)


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
