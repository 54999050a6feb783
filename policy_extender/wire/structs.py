"""Pruned msgspec Struct types built from a read set: only the Go keys the policies read.

A read set names, per object type (``task``, ``node``, ``job``, ``queue``), the wire paths the
loaded policy set reads (tuples of Go keys, ``"*"`` for every value of a map or element of a
list; see ``paths.WIRE``). ``struct_for(root, paths)`` turns that into nested msgspec
Structs that hold only those keys: msgspec skips every other key without building Python objects,
so a node's embedded pods (and their managedFields) cost a scan, not a parse.

Leaves whose Go type we know (``LEAF_TYPES``) are typed, so a string where Volcano sends a number
is a ValidationError with a path; leaves we do not know decode as plain JSON values. Every field
is optional and nullable (Go emits ``null`` for nil maps, slices and pointers, and Volcano adds
keys over time), except ``REQUIRED``: on the top-level object of a verb body (``$.task``,
``$.node``, ``$.nodes[i]``, ``$.evictees[i]``, ``$.job``, ``$.queue``, the snapshot's jobs and
queues) the fields Volcano always sends and the service keys state or decisions on must be there,
non-null, of their Go type. They are checked by the same pruned decode, at no extra parse.
"""

from __future__ import annotations

import keyword
import re
from functools import lru_cache
from typing import Annotated, Any

import msgspec

from .. import schema
from .paths import ALWAYS_READ, LEGACY_CRD, WirePath, wire_paths
from .quantity import QUANTITY_PATTERN


_STRUCT_OPTIONS = {"forbid_unknown_fields": False, "omit_defaults": True}

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
def struct_for(root: str, paths: frozenset[WirePath]) -> type:
    """A Struct type for the top-level object of type ``root`` of a verb body: exactly ``paths``
    (and ALWAYS_READ), with the ``REQUIRED`` fields required."""
    required = REQUIRED.get(root, {})
    return _build(root, (), _trie(paths_for(root, paths) | {(key,) for key in required}), required)


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


def _build(root: str, prefix: WirePath, trie: dict, required: dict[str, Any] | None = None) -> type:
    fields, rename = [], {}
    for key, sub in sorted(trie.items()):
        attr = attr_name(key)
        rename[attr] = key
        if required and key in required:
            fields.append((attr, required[key]))  # no default: missing or null is an error
        else:
            fields.append((attr, _value_type(root, prefix + (key,), sub) | None, None))
    name = "_".join((root.capitalize(),) + tuple(attr_name(k) for k in prefix)) or root
    return msgspec.defstruct(name, fields, rename=rename, kw_only=True, **_STRUCT_OPTIONS)


def _value_type(root: str, path: WirePath, sub: dict | None) -> Any:
    known = LEAF_TYPES.get(root, {}).get(path)
    if known is not None:
        return known
    if sub is None:
        return Any
    if "*" in sub:
        element = _element_type(root, path, sub["*"])
        return dict[str, element] | list[element]
    return _build(root, path, sub)


def _element_type(root: str, collection: WirePath, sub: dict | None) -> Any:
    element_root = ELEMENT_ROOTS.get((root, collection))
    if element_root is not None:
        paths = set(_paths_of(sub)) | set(ALWAYS_READ.get(element_root, ()))
        return _build(element_root, (), _trie(paths)) | None
    if not sub:
        return Any  # an unknown collection read whole
    return _build(root, collection + ("*",), sub) | None


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
