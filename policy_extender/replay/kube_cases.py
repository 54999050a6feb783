"""A recorded kube-scheduler call as a ``protocol: kube-scheduler`` fixture case's input
(docs/testing-policies.md, "kube-scheduler"): compact where the recorded body allows, the raw
body (``body_file``) otherwise.

The body allows a compact input when the compact objects read back from it (the case's ``task``
and ``node``, ``nodes``, or ``evictor`` and ``evictees``, as the verb's table entry names them)
expand, through the entry's ``wire.compact`` builder, into a body whose pod and nodes read the
same in every field a rule serving kube-scheduler can read (``schema.PROTOCOL_FIELDS``), and
whose shape is the one the builder gives: a filter of one node; victims on their own node with
no PDB violated. Anything else (a filter of several nodes, a field the compact format cannot say)
keeps the recorded body, so a case never tests less than what kube-scheduler sent.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from policy_extender.decide.table import Verb
from policy_extender.errors import CompactError, WireError
from policy_extender.schema import PROTOCOL_FIELDS
from policy_extender.wire.kube import KubeNodeView, KubePodView, decode_extender_args, decode_preemption_args
from policy_extender.wire.resources import Resources
from policy_extender.wire.views import View

_READABLE = PROTOCOL_FIELDS["kube-scheduler"]
#: the node conditions a compact node has unless it says otherwise (``wire.compact``)
_DEFAULT_CONDITIONS = {"MemoryPressure": "False", "DiskPressure": "False", "PIDPressure": "False"}


def compact_input(verb: Verb, body: bytes) -> dict | None:
    """The case's compact ``input`` for the recorded ``body`` of ``verb``, or None when only the
    raw body says everything a rule could read of it."""
    try:
        objects = _read_back(verb, body)
        if objects is None:
            return None
        rebuilt = orjson.dumps(verb.compact(*(objects[name] for name in verb.inputs)))  # type: ignore[misc]  # a deciding entry has its builder
        return objects if _readable(verb, rebuilt) == _readable(verb, body) else None
    except (CompactError, WireError, ValueError, TypeError):
        return None


def _read_back(verb: Verb, body: bytes) -> dict | None:
    if verb.inputs == ("evictor", "evictees"):
        request = decode_preemption_args(body)
        evictees = []
        for node in request.nodes:
            if node.pdb_violations:
                return None
            for pod in node.pods:
                if pod.node_name != node.node:
                    return None
                evictees.append(compact_pod(pod))
        return {"evictor": compact_pod(request.evictor), "evictees": evictees}
    filtering = decode_extender_args(body)
    nodes = [compact_node(node) for node in filtering.nodes]
    if verb.inputs == ("task", "node"):
        return {"task": compact_pod(filtering.task), "node": nodes[0]} if len(nodes) == 1 else None
    return {"task": compact_pod(filtering.task), "nodes": nodes}


def compact_pod(pod: KubePodView) -> dict:
    """A ``v1.Pod`` as a compact task: the fields kube-scheduler sends that are set."""
    out: dict[str, Any] = {"name": pod.name, "namespace": pod.namespace, "uid": pod.uid,
                           "labels": dict(pod.labels), "annotations": dict(pod.annotations),
                           "priority": pod.priority, "priority_class": pod.priority_class,
                           "requests": pod.requests.as_dict(), "node_selector": dict(pod.node_selector),
                           "tolerations": [_fields(t, "toleration") for t in pod.tolerations],
                           "node_name": pod.node_name}
    if pod.init_requests != pod.requests:
        out["init_requests"] = pod.init_requests.as_dict()
    return _set(out)


def compact_node(node: KubeNodeView) -> dict:
    """A ``v1.Node`` as a compact node: the fields kube-scheduler sends that are set."""
    conditions = {kind: status for kind, status in node.conditions.items()
                  if kind != "Ready" and _DEFAULT_CONDITIONS.get(kind) != status}
    return _set({"name": node.name, "labels": dict(node.labels), "annotations": dict(node.annotations),
                 "taints": [_fields(t, "taint") for t in node.taints], "unschedulable": node.unschedulable,
                 "ready": node.ready, "conditions": conditions, "allocatable": _plain(node.allocatable),
                 "capacity": _plain(node.capacity)})


def _set(fields: dict) -> dict:
    """Without the fields left at their compact defaults (empty, zero, false; ``ready`` is true
    unless said)."""
    return {key: value for key, value in fields.items() if value or (key == "ready" and value is False)}


def _fields(view: View, kind: str) -> dict:
    return {name: value for name in sorted(_READABLE[kind]) if (value := getattr(view, name)) not in (None, "")}


def _readable(verb: Verb, body: bytes) -> Any:
    """Everything a kube-scheduler rule can read of the body, as plain data, and its shape."""
    if verb.inputs == ("evictor", "evictees"):
        request = decode_preemption_args(body)
        return (_view(request.evictor, "task"),
                {node.node: (node.pdb_violations, [_view(pod, "task") for pod in node.pods]) for node in request.nodes})
    filtering = decode_extender_args(body)
    return _view(filtering.task, "task"), [_view(node, "node") for node in filtering.nodes]


def _view(view: View, kind: str) -> dict:
    return {name: _plain(getattr(view, name)) for name in sorted(_READABLE[kind])}


def _plain(value: Any) -> Any:
    if isinstance(value, Resources):
        return {name: amount for name, amount in value.as_dict().items() if amount}
    if isinstance(value, Mapping):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    if isinstance(value, View):
        return {name: getattr(value, name) for name in sorted(dir(type(value)))
                if not name.startswith("_") and isinstance(getattr(type(value), name), property)}
    return value
