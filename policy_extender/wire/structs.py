"""Pruned msgspec Struct types built from a read set: only the Go keys the policies read.

A read set names, per object type (``task``, ``node``, ``job``, ``queue``), the wire paths the
loaded policy set reads (tuples of Go keys, ``"*"`` for every value of a map or element of a
list; see ``paths.WIRE``). ``struct_for(root, paths)`` turns that into nested msgspec
Structs that hold only those keys: msgspec skips every other key without building Python objects,
so a node's embedded pods (and their managedFields) cost a scan, not a parse.

Leaves whose Go type we know (``LEAF_TYPES``) are typed, so a string where Volcano sends a number
is a ValidationError with a path; leaves we do not know decode as plain JSON values. A field is
optional and nullable (Volcano adds keys over time, and nobody reads it), except:

* ``REQUIRED``: on the top-level object of a verb body (``$.task``, ``$.node``, ``$.nodes[i]``,
  ``$.evictees[i]``, ``$.job``, ``$.queue``, the snapshot's jobs and queues) the fields Volcano
  always sends and the service keys state or decisions on, whatever the policies read;
* ``GO_KEYS`` that a loaded rule reads (the read set given to ``struct_for``, not the keys the
  service adds to it, ``ALWAYS_READ``): keys of Volcano's own structs, which Go always writes;
  such a key must be there, and not null unless Go can send null there (a nil pointer, map or
  slice). Inside the Kubernetes objects only the types of what is read are checked.

All of it is checked by the same pruned decode (msgspec's required fields), at no extra parse.
"""

from __future__ import annotations

import functools
import keyword
import operator
import re
import typing
from functools import lru_cache
from typing import Annotated, Any

import msgspec

from .. import schema
from .paths import ALWAYS_READ, LEGACY_CRD, WirePath, wire_paths
from .quantity import QUANTITY_PATTERN


_STRUCT_OPTIONS: dict[str, Any] = {"forbid_unknown_fields": False, "omit_defaults": True}

#: Go's integer types, bounded as Go bounds them: msgspec's ``int`` takes any size, and an int
#: past 64 bits, which Volcano can never send, could not be stored in the session (msgpack).
Int32 = Annotated[int, msgspec.Meta(ge=-2**31, le=2**31 - 1)]
Int64 = Annotated[int, msgspec.Meta(ge=-2**63, le=2**63 - 1)]  # Go's int on 64-bit platforms too


class Resource(msgspec.Struct, **_STRUCT_OPTIONS):
    """Volcano's api.Resource: CPU in millicores, memory in bytes, scalars x1000 except pods."""

    MilliCPU: float | None = None
    Memory: float | None = None
    ScalarResources: dict[str, float | None] | None = None
    MaxTaskNum: Int64 | None = None


class NodeState(msgspec.Struct, **_STRUCT_OPTIONS):
    Phase: Int64 | None = None
    Reason: str | None = None


class Toleration(msgspec.Struct, **_STRUCT_OPTIONS):
    key: str | None = None
    operator: str | None = None
    value: str | None = None
    effect: str | None = None
    tolerationSeconds: Int64 | None = None


class Taint(msgspec.Struct, **_STRUCT_OPTIONS):
    key: str | None = None
    value: str | None = None
    effect: str | None = None


class Condition(msgspec.Struct, **_STRUCT_OPTIONS):
    type: str | None = None
    status: str | None = None


Quantity = Annotated[str, msgspec.Meta(pattern=QUANTITY_PATTERN)]
#: A Kubernetes ResourceList: ``{"cpu": "500m", "memory": "4Gi"}`` (numbers tolerated).
QuantityMap = dict[str, Quantity | float | None]


class Guarantee(msgspec.Struct, **_STRUCT_OPTIONS):
    resource: QuantityMap | None = None


StrMap = dict[str, str | None]

#: A Go string that is never empty in a real session (a pod's UID, a node's name, ...).
NonEmpty = Annotated[str, msgspec.Meta(min_length=1)]

#: Fields Volcano always emits (Go strings and ints, no ``omitempty``: never missing, never null)
#: that the service keys state or decisions on; required on the top-level object of each verb
#: body and on the snapshot's jobs and queues (not on the tasks nested in a node or a job):
#: task: ``UID`` keys allocations and victims, ``Job`` finds the task's job in the session,
#: ``NodeName`` keys the allocation's node; node: ``Name`` keys scores and per-node counts;
#: job: ``UID`` keys the session's jobs, ``Queue`` finds its queue, ``MinAvailable`` is the gang
#: size jobEnqueueable/jobReady decide on; queue: ``UID`` and ``Name`` find it and key its counts.
#: Listed in docs/reliability.md.
REQUIRED: dict[str, dict[str, Any]] = {
    "task": {"UID": NonEmpty, "Job": str, "NodeName": str},
    "node": {"Name": NonEmpty},
    "job": {"UID": NonEmpty, "Queue": str, "MinAvailable": Int32},
    "queue": {"UID": NonEmpty, "Name": NonEmpty},
}

#: Go types of the leaves the schema reads, per object type, by wire path.
LEAF_TYPES: dict[str, dict[WirePath, Any]] = {
    "task": {
        ("UID",): str, ("Job",): str, ("Name",): str, ("Namespace",): str, ("TaskRole",): str,
        ("NodeName",): str, ("Priority",): Int32, ("Status",): Int64, ("Preemptable",): bool,
        ("BestEffort",): bool, ("Resreq",): Resource, ("InitResreq",): Resource,
        ("Pod", "metadata", "labels"): StrMap, ("Pod", "metadata", "annotations"): StrMap,
        ("Pod", "spec", "priorityClassName"): str, ("Pod", "spec", "nodeSelector"): StrMap,
        ("Pod", "spec", "tolerations"): list[Toleration],
    },
    "node": {
        ("Name",): str, ("Node", "metadata", "labels"): StrMap,
        ("Node", "metadata", "annotations"): StrMap, ("Node", "spec", "taints"): list[Taint],
        ("Node", "spec", "unschedulable"): bool, ("Node", "status", "conditions"): list[Condition],
        ("State",): NodeState, **{(k,): Resource for k in
                                 ("Allocatable", "Capacity", "Idle", "Used", "Releasing", "Pipelined")},
    },
    "job": {
        ("UID",): str, ("Name",): str, ("Namespace",): str, ("Queue",): str, ("Priority",): Int32,
        ("MinAvailable",): Int32, ("Preemptable",): bool, ("Allocated",): Resource,
        ("TotalRequest",): Resource, ("PodGroup", "spec", "minResources"): QuantityMap,
        ("PodGroup", "metadata", "labels"): StrMap, ("PodGroup", "metadata", "annotations"): StrMap,
        ("PodGroup", "status", "phase"): str,
    },
    "queue": {
        ("UID",): str, ("Name",): str, ("Weight",): Int32,
        ("Queue", "spec", "capability"): QuantityMap, ("Queue", "spec", "deserved"): QuantityMap,
        ("Queue", "spec", "guarantee"): Guarantee, ("Queue", "status", "allocated"): QuantityMap,
        ("Queue", "spec", "reclaimable"): bool, ("Queue", "status", "state"): str,
        ("Queue", "spec", "parent"): str, ("Queue", "metadata", "labels"): StrMap,
        ("Queue", "metadata", "annotations"): StrMap,
    },
}
for _types in LEAF_TYPES.values():  # the same types under Volcano <= v1.13's keys
    _types.update({legacy: _types[modern] for modern, legacy in LEGACY_CRD.items() if modern in _types})


#: The keys of Volcano's own structs that the schema reads (``pkg/scheduler/api``: TaskInfo with
#: its embedded TransactionContext, NodeInfo, JobInfo, QueueInfo, and the Resource and NodeState
#: values inside them), by struct: the JSON type Go writes, and whether the value can be ``null``.
#: None of these structs has a json tag (v1.10 to v1.15), so encoding/json writes every key of
#: them, always: a Go string, number, bool or struct value is never missing nor null; a pointer,
#: map or slice is ``null`` when nil (a pending task's ``Pod`` never is, a ``Resreq`` is not in
#: practice, but Go could send it). A key listed here that a loaded rule reads is required.
#:
#: Not listed, so never required: the keys of the Kubernetes objects inside (``Pod``, ``Node``,
#: a job's ``PodGroup``, a queue's ``Queue``). Their fields carry json tags, mostly ``omitempty``:
#: a pod without annotations has no ``annotations`` key, an empty map or list, a false bool, an
#: empty string are left out. And Volcano up to v1.13 wrote PodGroup and Queue from its internal
#: API types, which had no json tags then (``Spec``, ``Status``, the metadata inline). There a
#: field read may be absent or null, and reads as empty; only a wrong type is an error.
GO_KEYS: dict[str, dict[str, tuple[str, bool]]] = {
    "task": {"UID": ("string", False), "Job": ("string", False), "Name": ("string", False),
             "Namespace": ("string", False), "TaskRole": ("string", False), "NodeName": ("string", False),
             "Status": ("integer", False), "Priority": ("integer", False), "Preemptable": ("bool", False),
             "BestEffort": ("bool", False), "Resreq": ("object", True), "InitResreq": ("object", True),
             "Pod": ("object", True)},
    "node": {"Name": ("string", False), "Node": ("object", True), "State": ("object", False),
             **{key: ("object", True) for key in ("Releasing", "Pipelined", "Idle", "Used", "Allocatable",
                                                  "Capacity", "Tasks")}},
    "job": {"UID": ("string", False), "Name": ("string", False), "Namespace": ("string", False),
            "Queue": ("string", False), "Priority": ("integer", False), "MinAvailable": ("integer", False),
            "Preemptable": ("bool", False), "Tasks": ("object", True), "Allocated": ("object", True),
            "TotalRequest": ("object", True), "PodGroup": ("object", True)},
    "queue": {"UID": ("string", False), "Name": ("string", False), "Weight": ("integer", False),
              "Queue": ("object", True)},
    # the struct values inside: a rule reading one amount requires the key it is in (``node.idle.gpu``
    # ScalarResources, ``.cpu`` MilliCPU, ``.memory`` Memory); one reading the value only as a whole
    # (``node.idle`` by a computed name; ``node.ready`` reads ``State``) every key listed here.
    # MaxTaskNum and Reason are never read.
    "Resource": {"MilliCPU": ("number", False), "Memory": ("number", False),
                 "ScalarResources": ("object", True)},
    "NodeState": {"Phase": ("integer", False)},
}

_GO_TYPE_WORDS = {"string": "a string", "integer": "an integer", "number": "a number", "bool": "true or false",
                  "object": "an object"}


def expected(struct: str, key: str) -> str | None:
    """What ``key`` of the Go struct ``struct`` holds, in words (``"an object or null"``), for the
    error of a body without it; None for a key that is never required."""
    if REQUIRED.get(struct, {}).get(key) is NonEmpty:
        return "a non-empty string"
    go = GO_KEYS.get(struct, {}).get(key)
    if go is None:
        return None
    return _GO_TYPE_WORDS[go[0]] + (" or null" if go[1] else "")


def _element_roots() -> dict[tuple[str, WirePath], str]:
    """(object type, path to a collection) -> object type of its elements, from the schema."""
    roots = {}
    for owner, fields in schema.TYPES.items():
        for f in fields.values():
            inner = re.fullmatch(r"(?:list|map)\[(\w+)\]", f.type)
            for path in wire_paths((owner, f.name)):
                if inner and inner.group(1) in schema.TYPES and path and path[-1] == "*":
                    roots[(owner, path[:-1])] = inner.group(1)
    return roots


#: ``node.Tasks.*`` holds tasks, ``job.Tasks.*`` too: their elements are read as ``task``.
ELEMENT_ROOTS = _element_roots()


def attr_name(key: str) -> str:
    """The Python attribute a Go key decodes into (Go keys are identifiers; others are escaped)."""
    if key.isidentifier() and not keyword.iskeyword(key):
        return key
    return "k_" + re.sub(r"\W", lambda m: f"_{ord(m.group()):x}_", key)


def paths_for(root: str, paths) -> frozenset[WirePath]:
    """The policies' paths for ``root`` plus the ones the service always needs."""
    return frozenset(paths or ()) | frozenset(ALWAYS_READ.get(root, ()))


@lru_cache(maxsize=256)
def struct_for(root: str, paths: frozenset[WirePath], extra: frozenset[WirePath] = frozenset()) -> type:
    """A Struct type for the top-level object of type ``root`` of a verb body: exactly ``paths``
    (the policies' reads), ALWAYS_READ and ``extra`` (what one verb's handler reads itself),
    with the ``REQUIRED`` fields required, and the ``GO_KEYS`` that ``paths`` read."""
    required = REQUIRED.get(root, {})
    trie = _trie(paths_for(root, paths) | extra | {(key,) for key in required})
    return _build(root, (), trie, _Reads(root, frozenset(p for p in paths or () if p)), required)


class _Reads:
    """The rule reads below one Struct being built: which of its keys a rule reads, and the reads
    below each key. ``struct`` names the Go struct whose keys these are (a ``GO_KEYS`` entry), or
    is None inside a Kubernetes object, where no key is required."""

    __slots__ = ("struct", "paths")

    def __init__(self, struct: str | None, paths: frozenset[WirePath]) -> None:
        self.struct, self.paths = struct, paths

    def required(self, key: str) -> tuple[str, bool] | None:
        """(Go type, nullable) of ``key`` when a rule reads it (or below it) and Go always sends it."""
        go = GO_KEYS.get(self.struct, {}).get(key) if self.struct else None
        if go is not None and any(path[0] == key for path in self.paths):
            return go
        return None

    def below(self, key: str, struct: str | None = None) -> _Reads:
        """The reads below ``key``, as keys of the Go struct ``struct`` (None: not one of Volcano's).
        A value read only whole (its own path, none below it) reads every key of that struct. (A
        read of ``node.idle.gpu`` records ``node.idle`` too, so a Resource that one rule reads
        whole and another by amount is held to the amounts read: what it was held to before.)"""
        deeper = frozenset(path[1:] for path in self.paths if len(path) > 1 and path[0] == key)
        if not deeper and (key,) in self.paths and struct in GO_KEYS:
            deeper = frozenset((k,) for k in GO_KEYS[struct])
        return _Reads(struct, deeper)


_NO_READS = _Reads(None, frozenset())


def _trie(paths) -> dict:
    """Nested dict of path keys: ``None`` means "read the whole value here"; a ``"*"`` key holds
    the paths read on every element of a collection (``{}``: only the elements' ALWAYS_READ)."""
    trie: dict = {}
    for path in sorted((p for p in paths if p), key=len):
        node = trie
        for key in path[:-1]:
            child = node.setdefault(key, {})
            if child is None:
                break  # a shorter path already reads this whole value
            node = child
        else:
            if path[-1] == "*":
                node.setdefault("*", {})  # the elements; their fields come from longer paths
            else:
                node[path[-1]] = None
    return trie


def _build(root: str, prefix: WirePath, trie: dict, reads: _Reads = _NO_READS,
           identity: dict[str, Any] | None = None) -> type:
    fields: list[tuple] = []
    rename = {}
    for key, sub in sorted(trie.items()):
        attr = attr_name(key)
        rename[attr] = key
        if identity and key in identity:
            fields.append((attr, identity[key]))  # no default: missing or null is an error
            continue
        value = _value_type(root, prefix + (key,), sub, reads.below(key, _struct_at(root, prefix + (key,))))
        go = reads.required(key)
        if go is None:
            fields.append((attr, value | None, None))
        else:  # no default: missing is an error; null too unless Go sends null there
            fields.append((attr, value | None if go[1] else value))
    name = "_".join((root.capitalize(),) + tuple(attr_name(k) for k in prefix)) or root
    return msgspec.defstruct(name, fields, rename=rename, kw_only=True, **_STRUCT_OPTIONS)


#: the Struct types of ``LEAF_TYPES`` that are Volcano's own structs (``GO_KEYS``' last entries)
_GO_STRUCTS: dict[Any, str] = {Resource: "Resource", NodeState: "NodeState"}


def _struct_at(root: str, path: WirePath) -> str | None:
    """The ``GO_KEYS`` entry naming the keys of the value at ``path``, if it is one of Volcano's
    structs (a Resource, a NodeState; the elements of a collection are handled apart)."""
    return _GO_STRUCTS.get(LEAF_TYPES.get(root, {}).get(path))


def _value_type(root: str, path: WirePath, sub: dict | None, reads: _Reads = _NO_READS) -> Any:
    known = LEAF_TYPES.get(root, {}).get(path)
    if known is not None:
        if known in _GO_STRUCTS and reads.paths:
            return _with_required(known, frozenset(key for (key, *_) in reads.paths
                                                   if key in GO_KEYS[_GO_STRUCTS[known]]))
        return known
    if sub is None:
        return Any
    if "*" in sub:
        element = _element_type(root, path, sub["*"], reads.below("*"))
        return dict[str, element] | list[element]  # type: ignore[valid-type]  # a Struct built at run time
    return _build(root, path, sub, reads)


@lru_cache(maxsize=None)
def _with_required(struct: type, keys: frozenset[str]) -> type:
    """``struct`` (a Resource, a NodeState) with ``keys`` required as Go sends them: the same
    fields and types otherwise, so every reader of it reads it alike."""
    go = GO_KEYS[_GO_STRUCTS[struct]]
    fields: list[tuple] = []
    for name, hint in _hints(struct):
        if name in keys:
            fields.append((name, hint if go[name][1] else _non_null(hint)))
        else:
            fields.append((name, hint, None))
    return msgspec.defstruct(struct.__name__, fields, kw_only=True, **_STRUCT_OPTIONS)


def _hints(struct: type) -> list[tuple[str, Any]]:
    return [(f.name, f.type) for f in msgspec.structs.fields(struct)]


def _non_null(hint: Any) -> Any:
    """``T | None`` -> ``T``."""
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    return functools.reduce(operator.or_, args) if args else hint


def _element_type(root: str, collection: WirePath, sub: dict | None, reads: _Reads = _NO_READS) -> Any:
    element_root = ELEMENT_ROOTS.get((root, collection))
    if element_root is not None:
        paths = set(_paths_of(sub)) | set(ALWAYS_READ.get(element_root, ()))
        return _build(element_root, (), _trie(paths), _Reads(element_root, reads.paths)) | None
    if not sub:
        return Any  # an unknown collection read whole
    return _build(root, collection + ("*",), sub, reads) | None


def _paths_of(trie: dict | None, prefix: WirePath = ()):
    for key, sub in (trie or {}).items():
        if sub is None:
            yield prefix + (key,)
        else:
            yield from _paths_of(sub, prefix + (key,))


def every_path(root: str, depth: int = 2) -> frozenset[WirePath]:
    """Every wire path the schema knows for ``root``, element fields included (``depth`` levels
    of collections deep): the read set of a policy that reads everything."""
    paths = set()
    for f in schema.TYPES.get(root, {}).values():
        for path in wire_paths((root, f.name)):
            paths.add(path)
            element = ELEMENT_ROOTS.get((root, path[:-1])) if path[-1:] == ("*",) else None
            if element and depth > 0:
                paths |= {path + p for p in every_path(element, depth - 1)}
    return frozenset(paths)


def full_reads() -> dict[str, frozenset[WirePath]]:
    """A read set with every schema field of every object type (tests, the fixture runner)."""
    return {root: every_path(root) for root in ("task", "node", "job", "queue")}
