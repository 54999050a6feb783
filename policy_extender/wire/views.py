"""Views: the objects policies read, one attribute per field of ``schema.TYPES``.

A view wraps a pruned decoded Struct (see ``structs.py``) and converts on access, so fields no
rule reads cost nothing. Units are normalised (``resources.py``), task status is a name, maps and
lists are never None, and ``task.job`` / ``task.queue`` / ``job.queue`` resolve through the Env
the view carries. A field the read set did not include reads as its empty value.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence

import msgspec

from .cluster import ClusterView, JobCounts, shifted
from .paths import LEGACY_CRD, TASK_STATUSES
from .resources import Counts, Resources, amount_from_wire, amount_reader, field_of
from .session_views import NO_SESSION, AllocationView, CycleAllocations, NoSession, PlacedTask, SessionView, SnapshotEnv

__all__ = ["TaskView", "NodeView", "NetNodeView", "NetJobView", "net_job", "ClusterView", "JobCounts", "JobView", "QueueView", "TaintView", "TolerationView",
           "Resources", "Counts", "SessionView", "AllocationView", "CycleAllocations", "PlacedTask", "NoSession",
           "NO_SESSION", "SnapshotEnv", "VIEW_TYPES", "WireMapping", "WireResources"]

#: Task statuses that count as ready for a job (Volcano's ReadyTaskNum).
READY_STATUSES = frozenset({2, 8, 16, 32, 128})
PENDING_STATUS = 1


def _dig(obj, *keys):
    """``obj.k1.k2...`` through Structs and dicts alike; None as soon as a step is missing.
    (``field_of`` inlined: a predicate call digs a dozen times, the call per step was a third of it.)"""
    for key in keys:
        if obj is None:
            return None
        obj = obj.get(key) if isinstance(obj, dict) else getattr(obj, key, None)
    return obj


#: names a step must not have: an attribute path would find a method of the value there
_NOT_STEPS = frozenset(n for t in (dict, list, str, int, float, msgspec.Struct) for n in dir(t))


def _path(keys: tuple[str, ...]):
    """The attribute path of ``keys`` as one ``attrgetter`` (refusing steps named like methods)."""
    if _NOT_STEPS.intersection(keys):
        raise ValueError(f"{keys}: a step named like a method cannot be read as an attribute path")
    return operator.attrgetter(".".join(keys))


# Each field reads its wire path with one ``attrgetter`` (the path in C), and digs step by step
# (``_dig``) only when a step is None, a dict or absent (the ``AttributeError``). The getter is
# one function per field, the path inline: a rule's field read is one Python call.

def _string(*keys) -> property:
    """A field read as it is (a string, a list, a Struct, or None)."""
    path = _path(keys)

    def read(self):
        try:
            return path(self.raw)
        except AttributeError:
            return _dig(self.raw, *keys)
    return property(read)


def _crd(raw, *keys):
    """A field of the PodGroup in a JobInfo or the Queue in a QueueInfo: under its v1.14 key, or
    else under Volcano <= v1.13's (``paths.LEGACY_CRD``)."""
    value = _dig(raw, *keys)
    if value is None and keys in LEGACY_CRD:
        value = _dig(raw, *LEGACY_CRD[keys])
    return value


def _crd_string(*keys) -> property:
    return property(lambda self: _crd(self.raw, *keys))


class WireMapping(property):
    """A view field that is a Go map on the wire at ``keys`` (a dict, never None). ``path`` is
    the attribute path of ``keys`` in one ``attrgetter``; ``View.raw_map_path`` gives it to the
    compiler, which reads ``task.annotations["x"]`` through it without this property's call."""

    def __init__(self, keys: tuple[str, ...]) -> None:
        path = _path(keys)

        def read(view):
            try:
                value = path(view.raw)
            except AttributeError:
                value = _crd(view.raw, *keys)
            return value if isinstance(value, dict) else {}
        super().__init__(read)
        self.keys, self.path = keys, path


def _mapping(*keys) -> property:
    """A Go map: a dict, never None."""
    return WireMapping(keys)


def _number(*keys) -> property:
    path = _path(keys)

    def read(self):
        try:
            return path(self.raw) or 0
        except AttributeError:
            return _dig(self.raw, *keys) or 0
    return property(read)


def _flag(*keys) -> property:
    path = _path(keys)

    def read(self):
        try:
            return bool(path(self.raw))
        except AttributeError:
            return bool(_dig(self.raw, *keys))
    return property(read)


def _elements(collection) -> list:
    """Values of a Go map or elements of a Go slice, skipping nulls."""
    if not collection:
        return []
    values = collection.values() if isinstance(collection, dict) else collection
    return [v for v in values if v is not None]


class WireResources(property):
    """A view field read from one of Volcano's ``Resource`` objects (``key`` on the wire), in
    whole units; ``View.amount`` reads a single amount of it (``amount_from_wire``)."""

    def __init__(self, key: str, doc: str | None = None) -> None:
        super().__init__(lambda view: Resources.from_wire(field_of(view.raw, key)), doc=doc)
        self.key = key


class View:
    """Base: the decoded object ``raw`` (a Struct, a dict or None) and the ``env``."""

    __slots__ = ("raw", "env")

    def __init__(self, raw, env=NO_SESSION):
        self.raw = raw
        self.env = env

    def with_env(self, env):
        """The same object seen through another Env (the raw data is shared, not copied)."""
        return type(self)(self.raw, env)

    def amount(self, field: str, name: str):
        """``getattr(self, field)[name]``; a ``WireResources`` field converts only that amount
        (what the compiler reads for ``node.idle.gpu``)."""
        wire = getattr(type(self), field, None)
        if type(wire) is WireResources:
            return amount_from_wire(field_of(self.raw, wire.key), name)
        return getattr(self, field)[name]

    @classmethod
    def raw_amount_reader(cls, field: str, name: str):
        """``raw -> amount`` doing what ``view.amount(field, name)`` does for a view of this class
        (called with ``view.raw``), or None when ``field`` is not a ``WireResources`` field."""
        wire = getattr(cls, field, None)
        return amount_reader(wire.key, name) if type(wire) is WireResources else None

    @classmethod
    def raw_map_path(cls, field: str):
        """``raw -> the map`` for a ``WireMapping`` field of this class (an ``attrgetter``: it
        raises AttributeError where a step is None, a dict or absent, and the field's own read
        then decides), or None for any other field."""
        wire = getattr(cls, field, None)
        return wire.path if type(wire) is WireMapping else None

    def __repr__(self) -> str:
        ident = field_of(self.raw, "UID") or field_of(self.raw, "Name") or field_of(self.raw, "key")
        return f"{type(self).__name__}({ident!r})"


class TaintView(View):
    __slots__ = ()
    key = _string("key")
    value = _string("value")
    effect = _string("effect")


class TolerationView(View):
    __slots__ = ()
    key = _string("key")
    operator = _string("operator")
    value = _string("value")
    effect = _string("effect")


class TaskView(View):
    """A Volcano TaskInfo (one pod)."""

    __slots__ = ()
    uid = _string("UID")
    name = _string("Name")
    namespace = _string("Namespace")
    role = _string("TaskRole")
    labels = _mapping("Pod", "metadata", "labels")
    annotations = _mapping("Pod", "metadata", "annotations")
    priority = _number("Priority")
    priority_class = _string("Pod", "spec", "priorityClassName")
    requests = WireResources("Resreq")
    init_requests = WireResources("InitResreq")
    node_selector = _mapping("Pod", "spec", "nodeSelector")
    status = property(lambda self: TASK_STATUSES.get(field_of(self.raw, "Status")))
    preemptable = _flag("Preemptable")
    best_effort = _flag("BestEffort")
    node_name = _string("NodeName")
    job_id = _string("Job")

    @property
    def tolerations(self) -> list[TolerationView]:
        return [TolerationView(t, self.env) for t in _elements(_dig(self.raw, "Pod", "spec", "tolerations"))]

    @property
    def job(self):
        return self.env.job(self.job_id)

    @property
    def queue(self):
        job = self.job
        return job.queue if job is not None else None


class NodeView(View):
    """A Volcano NodeInfo."""

    __slots__ = ()
    name = _string("Name")
    labels = _mapping("Node", "metadata", "labels")
    annotations = _mapping("Node", "metadata", "annotations")
    unschedulable = _flag("Node", "spec", "unschedulable")
    ready = property(lambda self: _dig(self.raw, "State", "Phase") == 1)
    allocatable = WireResources("Allocatable")
    capacity = WireResources("Capacity")
    idle = WireResources("Idle")
    used = WireResources("Used")
    releasing = WireResources("Releasing")
    pipelined = WireResources("Pipelined")

    @property
    def taints(self) -> list[TaintView]:
        return [TaintView(t, self.env) for t in _elements(_dig(self.raw, "Node", "spec", "taints"))]

    @property
    def conditions(self) -> dict[str, str]:
        found = _elements(_dig(self.raw, "Node", "status", "conditions"))
        return {field_of(c, "type"): field_of(c, "status") for c in found if field_of(c, "type")}

    @property
    def tasks(self) -> list[TaskView]:
        return [TaskView(t, self.env) for t in _elements(field_of(self.raw, "Tasks"))]

    def moved_by(self, moved: dict[str, int | float]) -> NetNodeView:
        """This node with ``moved`` (whole units by full name) allocated on it this cycle."""
        return NetNodeView(self.raw, self.env, moved)

    def net_of(self, moved: dict[str, int | float], placed: Sequence[AllocationView] = (),
               evicted: Sequence[AllocationView] = (), env=None) -> NetNodeView:
        """This node with this cycle on it: ``moved`` as ``moved_by``, and the tasks ``placed``
        on it and ``evicted`` from it (``AllocationView``s, in event order), seen through ``env``
        (else its own). A placed task the snapshot lists on the node already is listed once, as
        its event sent it."""
        gone = frozenset(v.task for v in evicted) | frozenset(v.task for v in placed)
        return NetNodeView(self.raw, self.env if env is None else env, moved, tuple(placed), gone)


class NetNodeView(NodeView):
    """A node of ``cluster.nodes`` net of this cycle's allocations on it: ``idle`` and ``used``
    (``_moved``: the counters' net amounts there, whole units by full name), and ``tasks``: the
    snapshot's without those evicted this cycle (``_gone``: UIDs), then those placed on it this
    cycle (``_placed``: ``AllocationView``s, in event order; each read as the task its event
    sent, ``wire.placed``)."""

    __slots__ = ("_moved", "_placed", "_gone")

    def __init__(self, raw, env, moved: dict[str, int | float], placed: tuple = (),
                 gone: frozenset = frozenset()) -> None:
        super().__init__(raw, env)
        self._moved, self._placed, self._gone = moved, placed, gone

    def with_env(self, env):
        return NetNodeView(self.raw, env, self._moved, self._placed, self._gone)

    def moved_by(self, moved: dict[str, int | float]) -> NetNodeView:
        total = dict(self._moved)
        for name, amount in moved.items():
            total[name] = total.get(name, 0) + amount
        return NetNodeView(self.raw, self.env, total, self._placed, self._gone)

    # plain properties (not ``WireResources``): the compiler reads them as any attribute
    idle = property(lambda self: shifted(Resources.from_wire(field_of(self.raw, "Idle")), self._moved, -1))
    used = property(lambda self: shifted(Resources.from_wire(field_of(self.raw, "Used")), self._moved, 1))

    @property
    def tasks(self) -> list[TaskView]:
        gone, env = self._gone, self.env
        tasks = [TaskView(t, env) for t in _elements(field_of(self.raw, "Tasks"))
                 if not gone or field_of(t, "UID") not in gone]
        tasks.extend(TaskView(view.task_raw(), env) for view in self._placed)
        return tasks


class JobView(View):
    """A Volcano JobInfo (a PodGroup and its tasks)."""

    __slots__ = ()
    uid = _string("UID")
    name = _string("Name")
    namespace = _string("Namespace")
    queue_name = _string("Queue")
    priority = _number("Priority")
    min_available = _number("MinAvailable")
    preemptable = _flag("Preemptable")
    allocated = WireResources("Allocated")
    total_request = WireResources("TotalRequest")
    min_resources = property(lambda self: Resources.from_quantities(
        _crd(self.raw, "PodGroup", "spec", "minResources")))
    labels = _mapping("PodGroup", "metadata", "labels")
    annotations = _mapping("PodGroup", "metadata", "annotations")
    phase = _crd_string("PodGroup", "status", "phase")

    @property
    def queue(self):
        return self.env.queue(self.queue_name)

    @property
    def tasks(self) -> list[TaskView]:
        return [TaskView(t, self.env) for t in _elements(field_of(self.raw, "Tasks"))]

    def net_of(self, placed: Sequence[AllocationView], evicted: Sequence[AllocationView], env=None) -> JobView:
        """This job with this cycle's events on its tasks (``net_job``)."""
        return net_job(self, placed, evicted, env)

    def _statuses(self) -> list:
        return [field_of(t, "Status") for t in _elements(field_of(self.raw, "Tasks"))]

    @property
    def ready_tasks(self) -> int:
        return sum(1 for s in self._statuses() if s in READY_STATUSES)

    @property
    def pending_tasks(self) -> int:
        return sum(1 for s in self._statuses() if s == PENDING_STATUS)


#: Task statuses whose requests Volcano counts in a job's ``Allocated`` (``api.AllocatedStatus``:
#: Allocated, Binding, Bound, Running).
ALLOCATED_STATUSES = frozenset({2, 8, 16, 32})
#: The status Volcano gives a task it evicts (``Statement.Evict``).
RELEASING_STATUS = 64


class NetJobView(JobView):
    """A job of the session snapshot (``task.job``, ``evictor.job``) net of this cycle's events
    on its tasks, as Volcano's own JobInfo then holds it: a task placed this cycle has the status
    its event sent (Allocated or Pipelined) and its node, one evicted is Releasing; ``tasks``,
    ``ready_tasks`` and ``pending_tasks`` read those statuses, and ``allocated`` moves by the
    requests of each task whose status entered or left Volcano's allocated statuses.
    ``_changed``: task UID -> (status, node name, requests)."""

    __slots__ = ("_changed",)

    def __init__(self, raw, env, changed: dict[str, tuple[int, str | None, Resources]]) -> None:
        super().__init__(raw, env)
        self._changed = changed

    def with_env(self, env):
        return NetJobView(self.raw, env, self._changed)

    def _raw_tasks(self) -> list:
        changed, out = self._changed, []
        for task in _elements(field_of(self.raw, "Tasks")):
            found = changed.get(field_of(task, "UID"))
            if found is not None:
                task = {**(task if isinstance(task, dict) else msgspec.to_builtins(task)), "Status": found[0],
                        **({"NodeName": found[1]} if found[1] else {})}
            out.append(task)
        return out

    @property
    def tasks(self) -> list[TaskView]:
        return [TaskView(t, self.env) for t in self._raw_tasks()]

    def _statuses(self) -> list:
        changed = self._changed
        return [changed[uid][0] if (uid := field_of(t, "UID")) in changed else field_of(t, "Status")
                for t in _elements(field_of(self.raw, "Tasks"))]

    @property
    def allocated(self) -> Resources:
        """The open's ``Allocated`` with each changed task's requests added when its status is
        now one of Volcano's allocated ones and taken off when it is not: a task placed this
        cycle was pending at the open, one evicted was running (``Statement.Evict`` takes only
        running tasks), so the job's own tasks need not be read."""
        moved: dict[str, int | float] = {}
        for status, _, requests in self._changed.values():
            sign = 1 if status in ALLOCATED_STATUSES else -1 if status == RELEASING_STATUS else 0
            for name, amount in (requests.as_dict().items() if sign else ()):
                moved[name] = moved.get(name, 0) + sign * amount
        return shifted(Resources.from_wire(field_of(self.raw, "Allocated")), moved, 1)


def net_job(job: JobView, placed: Sequence[AllocationView], evicted: Sequence[AllocationView],
            env=None) -> JobView:
    """``job`` with the events of this cycle on its tasks (``NetJobView``, seen through ``env``,
    else ``job``'s own); ``job`` itself when there are none."""
    if not placed and not evicted:
        return job
    changed: dict[str, tuple[int, str | None, Resources]] = {}
    for view in evicted:
        changed[view.task or ""] = (RELEASING_STATUS, view.node, view.requests)
    for view in placed:
        status = field_of(view.raw, "Status") or 2  # a record without one: Allocated
        changed[view.task or ""] = (status, view.node, view.requests)
    return NetJobView(job.raw, job.env if env is None else env, changed)


class QueueView(View):
    """A Volcano QueueInfo (the Queue CRD)."""

    __slots__ = ()
    uid = _string("UID")
    name = _string("Name")
    weight = _number("Weight")
    capability = property(lambda self: Resources.from_quantities(_crd(self.raw, "Queue", "spec", "capability")))
    deserved = property(lambda self: Resources.from_quantities(_crd(self.raw, "Queue", "spec", "deserved")))
    guarantee = property(lambda self: Resources.from_quantities(
        _dig(_crd(self.raw, "Queue", "spec", "guarantee"), "resource")))
    allocated = property(lambda self: Resources.from_quantities(_crd(self.raw, "Queue", "status", "allocated")))
    state = _crd_string("Queue", "status", "state")
    parent = _crd_string("Queue", "spec", "parent")
    labels = _mapping("Queue", "metadata", "labels")
    annotations = _mapping("Queue", "metadata", "annotations")

    @property
    def reclaimable(self) -> bool:
        """Volcano treats an unset ``spec.reclaimable`` as true; so do we."""
        value = _crd(self.raw, "Queue", "spec", "reclaimable")
        return True if value is None else bool(value)


#: schema type name -> the view class that implements it.
VIEW_TYPES: dict[str, type] = {
    "task": TaskView, "node": NodeView, "job": JobView, "queue": QueueView,
    "taint": TaintView, "toleration": TolerationView, "resources": Resources, "counts": Counts,
    "session": SessionView, "allocation": AllocationView, "cluster": ClusterView, "jobcounts": JobCounts,
}
