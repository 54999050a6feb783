"""kube-scheduler's extender bodies: msgspec structs of what the views read, the views, the decoders.

kube-scheduler (``k8s.io/kube-scheduler/extender/v1``) sends ``ExtenderArgs{Pod, Nodes, NodeNames}``
to filter and prioritize and ``ExtenderPreemptionArgs{Pod, NodeNameToVictims, NodeNameToMetaVictims}``
to preempt. The wrapper types have no json tags (their keys are Go names); the objects inside are
real ``v1.Pod`` / ``v1.Node`` JSON (lowercase keys). The structs below hold only what
``KubePodView`` and ``KubeNodeView`` read (docs/kube-scheduler.md, "What a rule can read"): a node's
``managedFields``, ``images``, ``daemonEndpoints``, ``nodeInfo`` and the rest of its status, a pod's
status and everything else of its spec are skipped by msgspec without building Python objects.

Quantities (``"500m"``, ``"4Gi"``, ``"1e3"``, ``"2"``) are checked against the Kubernetes grammar
while decoding (``structs.Quantity``: a bad one is a ``WireError`` naming its path, answered 400)
and converted to whole units when a rule reads them (``quantity.parse_quantity``). There are no
milli units on this protocol: ``nvidia.com/gpu: "1"`` is one GPU.

There is no session: the views carry ``NO_SESSION`` and expose only the fields kube-scheduler
sends (``schema.PROTOCOL_FIELDS``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import msgspec

from policy_extender.errors import WireError
from .quantity import QUANTITY_PATTERN, parse_quantity
from .reading import decode_json
from .resources import EMPTY, Resources
from .session_views import NO_SESSION
from .structs import Condition, Int32, Int64, QuantityMap, StrMap, Taint, Toleration
from .views import TaintView, TolerationView, View, WireMapping

__all__ = ["KubePodView", "KubeNodeView", "KubeFilterRequest", "KubePreemptRequest", "KubeNodeVictims", "NodeCacheRefused",
           "decode_extender_args", "decode_preemption_args", "NODE_CACHE_REFUSAL"]

_OPTIONS: dict[str, Any] = {"forbid_unknown_fields": False}

#: The refusal of a body from a ``nodeCacheCapable: true`` extender (node names only).
NODE_CACHE_REFUSAL = ("nodeCacheCapable: true sends node names only and policy-extender keeps no node "
                      "cache; set nodeCacheCapable: false")


# ---------------------------------------------------------------- v1.Pod / v1.Node, pruned

class ObjectMeta(msgspec.Struct, **_OPTIONS):
    uid: str | None = None
    name: str | None = None
    namespace: str | None = None
    labels: StrMap | None = None
    annotations: StrMap | None = None


class ResourceRequirements(msgspec.Struct, **_OPTIONS):
    requests: QuantityMap | None = None


class Container(msgspec.Struct, **_OPTIONS):
    resources: ResourceRequirements | None = None


class PodSpec(msgspec.Struct, **_OPTIONS):
    priority: Int32 | None = None
    priorityClassName: str | None = None
    containers: list[Container | None] | None = None
    initContainers: list[Container | None] | None = None
    overhead: QuantityMap | None = None
    nodeSelector: StrMap | None = None
    tolerations: list[Toleration | None] | None = None
    nodeName: str | None = None


class Pod(msgspec.Struct, **_OPTIONS):
    metadata: ObjectMeta | None = None
    spec: PodSpec | None = None


class NodeSpec(msgspec.Struct, **_OPTIONS):
    unschedulable: bool | None = None
    taints: list[Taint | None] | None = None


class NodeStatus(msgspec.Struct, **_OPTIONS):
    capacity: QuantityMap | None = None
    allocatable: QuantityMap | None = None
    conditions: list[Condition | None] | None = None


class Node(msgspec.Struct, **_OPTIONS):
    metadata: ObjectMeta | None = None
    spec: NodeSpec | None = None
    status: NodeStatus | None = None


class NodeList(msgspec.Struct, **_OPTIONS):
    items: list[Node | None] | None = None


class ExtenderArgs(msgspec.Struct, **_OPTIONS):
    """filter and prioritize: ``Nodes`` with ``nodeCacheCapable: false``, ``NodeNames`` with true."""

    Pod: Pod | None = None
    Nodes: NodeList | None = None
    NodeNames: list[str | None] | None = None


class Victims(msgspec.Struct, **_OPTIONS):
    Pods: list[msgspec.Raw] | None = None
    NumPDBViolations: Int64 | None = None


class ExtenderPreemptionArgs(msgspec.Struct, **_OPTIONS):
    Pod: Pod | None = None
    NodeNameToVictims: dict[str, Victims | None] | None = None
    NodeNameToMetaVictims: dict[str, Any] | None = None


def _decode(decoder: msgspec.json.Decoder, body: Any, prefix: str = "$") -> Any:
    """``decode_json``, with the map keys msgspec leaves out of an error's path (``[...]``)
    found in the body: ``$.Nodes.items[3].status.allocatable.cpu``, not ``allocatable[...]``."""
    try:
        return decode_json(decoder, body, prefix)
    except WireError as error:
        if "[...]" not in error.path or not error.path.startswith(prefix):
            raise
        try:
            whole = msgspec.json.decode(body)
        except (msgspec.MsgspecError, UnicodeDecodeError):
            raise error from None
        steps = re.findall(r"\.([^.\[]+)|\[(\d+|\.\.\.)\]", error.path[len(prefix):])
        raise WireError(error.message, _keyed(whole, steps, prefix) or error.path) from None


_QUANTITY = re.compile(QUANTITY_PATTERN)


def _keyed(value: Any, steps: list[tuple[str, str]], path: str) -> str | None:
    """The path of ``steps`` through ``value`` with each ``[...]`` replaced by the first key that
    leads to a bad value (a quantity the grammar refuses, when the last step is a map's)."""
    if not steps:
        return path
    (key, index), rest = steps[0], steps[1:]
    if key:
        return _keyed(value.get(key), rest, f"{path}.{key}") if isinstance(value, dict) else None
    if index != "...":
        ok = isinstance(value, list) and int(index) < len(value)
        return _keyed(value[int(index)], rest, f"{path}[{index}]") if ok else None
    for name, item in (value.items() if isinstance(value, dict) else ()):
        if not rest and (isinstance(item, (int, float)) and not isinstance(item, bool)
                         or isinstance(item, str) and _QUANTITY.match(item)):
            continue  # a good quantity: not the one refused
        shown = f"{path}.{name}" if re.fullmatch(r"[A-Za-z0-9_-]+", name) else f"{path}[{name!r}]"
        found = _keyed(item, rest, shown)
        if found is not None:
            return found
    return None


_ARGS = msgspec.json.Decoder(ExtenderArgs)
_PREEMPTION_ARGS = msgspec.json.Decoder(ExtenderPreemptionArgs)
_POD = msgspec.json.Decoder(Pod | None)


# ---------------------------------------------------------------- views

def _quantities(quantities, path: str) -> dict[str, int | float]:
    """A ResourceList in whole units (the grammar was checked while decoding)."""
    if not quantities:
        return {}
    try:
        return {name: parse_quantity(value) for name, value in quantities.items() if value is not None}
    except ValueError as error:  # a number where a string belongs is decoded, never malformed
        raise WireError(str(error), path) from None


def _sum_into(total: dict[str, int | float], amounts: dict[str, int | float]) -> None:
    for name, value in amounts.items():
        total[name] = total.get(name, 0) + value


class KubePodView(View):
    """A ``v1.Pod`` as a ``task`` (or an ``evictor``/``evictee``): the fields kube-scheduler sends.

    ``requests`` is the sum of the containers' requests plus ``spec.overhead``; ``init_requests``
    takes per resource the larger of that sum and each init container's requests, plus the
    overhead (what the pod holds while an init container runs)."""

    __slots__ = ("_requests", "_init_requests", "_tolerations")

    def __init__(self, raw, env=NO_SESSION):
        super().__init__(raw, env)
        self._requests: Resources | None = None
        self._init_requests: Resources | None = None
        self._tolerations: list[TolerationView] | None = None

    uid = property(lambda self: _meta(self.raw, "uid"))
    name = property(lambda self: _meta(self.raw, "name"))
    namespace = property(lambda self: _meta(self.raw, "namespace"))
    labels = WireMapping(("metadata", "labels"))
    annotations = WireMapping(("metadata", "annotations"))
    node_selector = WireMapping(("spec", "nodeSelector"))
    priority = property(lambda self: _spec(self.raw, "priority") or 0)
    priority_class = property(lambda self: _spec(self.raw, "priorityClassName"))
    node_name = property(lambda self: _spec(self.raw, "nodeName") or "")

    @property
    def tolerations(self) -> list[TolerationView]:
        """Built once per pod (a filter reads them on every node of the call); never modified."""
        if self._tolerations is None:
            self._tolerations = [TolerationView(t, self.env) for t in _spec(self.raw, "tolerations") or ()
                                 if t is not None]
        return self._tolerations

    @property
    def requests(self) -> Resources:
        if self._requests is None:
            self._compute()
        return self._requests  # type: ignore[return-value]  # set by _compute

    @property
    def init_requests(self) -> Resources:
        if self._init_requests is None:
            self._compute()
        return self._init_requests  # type: ignore[return-value]  # set by _compute

    @property
    def best_effort(self) -> bool:
        """No container, init container or overhead requests any resource."""
        return not self.init_requests.as_dict()

    def _compute(self) -> None:
        self._requests, self._init_requests = pod_requests(self.raw)

    def __repr__(self) -> str:
        return f"KubePodView({_meta(self.raw, 'namespace')}/{_meta(self.raw, 'name')})"


def pod_requests(pod: Pod | None, path: str = "$.Pod") -> tuple[Resources, Resources]:
    """(requests, init_requests) of a decoded pod, in whole units (see :class:`KubePodView`)."""
    spec = pod.spec if pod is not None else None
    if spec is None:
        return EMPTY, EMPTY
    total: dict[str, int | float] = {}
    for i, container in enumerate(spec.containers or ()):
        if container is not None and container.resources is not None:
            _sum_into(total, _quantities(container.resources.requests, f"{path}.spec.containers[{i}]"))
    init = dict(total)
    for i, container in enumerate(spec.initContainers or ()):
        if container is not None and container.resources is not None:
            for name, value in _quantities(container.resources.requests,
                                           f"{path}.spec.initContainers[{i}]").items():
                init[name] = max(init.get(name, 0), value)
    overhead = _quantities(spec.overhead, f"{path}.spec.overhead")
    _sum_into(total, overhead)
    _sum_into(init, overhead)
    return (Resources(total) if total else EMPTY), (Resources(init) if init else EMPTY)


def _meta(raw, key: str):
    meta = raw.metadata if raw is not None else None
    return getattr(meta, key) if meta is not None else None


def _spec(raw, key: str):
    spec = raw.spec if raw is not None else None
    return getattr(spec, key) if spec is not None else None


def _status(raw, key: str):
    status = raw.status if raw is not None else None
    return getattr(status, key) if status is not None else None


class QuantityList(property):
    """A view field that is a Kubernetes ResourceList (``status.<key>``), in whole units; its
    view reads one amount of it (``amount``, ``raw_amount_reader``) without parsing the others:
    a rule reading ``node.allocatable.gpu`` on 1,000 nodes parses 1,000 quantities, not 7,000."""

    def __init__(self, key: str) -> None:
        super().__init__(lambda view: _resources(_status(view.raw, key)))
        self.key = key

    def one(self, raw, name: str) -> int | float:
        """The amount of the full resource name ``name`` in ``raw``'s list (0 when absent)."""
        quantities = _status(raw, self.key)
        value = quantities.get(name) if quantities else None
        return 0 if value is None else parse_quantity(value)


class KubeNodeView(View):
    """A ``v1.Node`` as a ``node``: the fields kube-scheduler sends (no pods: no idle, used, tasks)."""

    __slots__ = ()
    name = property(lambda self: _meta(self.raw, "name"))
    labels = WireMapping(("metadata", "labels"))
    annotations = WireMapping(("metadata", "annotations"))
    unschedulable = property(lambda self: bool(_spec(self.raw, "unschedulable")))
    allocatable = QuantityList("allocatable")
    capacity = QuantityList("capacity")

    def amount(self, field: str, name: str):
        """``getattr(self, field)[name]``, parsing one quantity for a ResourceList field."""
        wire = getattr(type(self), field, None)
        if type(wire) is QuantityList:
            return wire.one(self.raw, name)
        return getattr(self, field)[name]

    @classmethod
    def raw_amount_reader(cls, field: str, name: str):
        """``raw -> amount`` of a ResourceList field (the compiler's short path), else None."""
        wire = getattr(cls, field, None)
        if type(wire) is not QuantityList:
            return None
        return lambda raw: wire.one(raw, name)

    @property
    def taints(self) -> list[TaintView]:
        return [TaintView(t, self.env) for t in _spec(self.raw, "taints") or () if t is not None]

    @property
    def conditions(self) -> dict[str, str]:
        found = _status(self.raw, "conditions") or ()
        return {c.type: c.status for c in found if c is not None and c.type}

    @property
    def ready(self) -> bool:
        return any(c is not None and c.type == "Ready" and c.status == "True"
                   for c in _status(self.raw, "conditions") or ())

    def __repr__(self) -> str:
        return f"KubeNodeView({_meta(self.raw, 'name')!r})"


def _resources(quantities) -> Resources:
    return Resources({name: parse_quantity(v) for name, v in quantities.items() if v is not None}) \
        if quantities else EMPTY


# ---------------------------------------------------------------- requests and decoders

@dataclass(frozen=True, slots=True)
class KubeFilterRequest:
    """filter / prioritize: the pod (a ``task`` to the rules) and the candidate nodes, in the order sent."""

    task: KubePodView
    nodes: list[KubeNodeView]


@dataclass(frozen=True, slots=True)
class KubeNodeVictims:
    """One node of a preempt call: the victims kube-scheduler proposes there, their UIDs, and
    ``NumPDBViolations`` (passed back unchanged)."""

    node: str
    pods: list[KubePodView]
    uids: list[str]
    pdb_violations: int


@dataclass(frozen=True, slots=True)
class KubePreemptRequest:
    """preempt: the pod preempting (the rules' ``evictor``) and, per node, the victims proposed."""

    evictor: KubePodView
    nodes: list[KubeNodeVictims]


def _pod_view(pod: Pod | None, path: str) -> KubePodView:
    if pod is None:
        raise WireError("missing: the body must carry the pod being scheduled (is kube-scheduler's "
                        "extender pointed at the right verb path?)", path)
    return KubePodView(pod, NO_SESSION)


class NodeCacheRefused(WireError):
    """A body from a ``nodeCacheCapable: true`` extender: node names without the nodes."""

    def __init__(self, path: str) -> None:
        super().__init__(NODE_CACHE_REFUSAL, path)


def decode_extender_args(body: bytes, reads=None, env=NO_SESSION) -> KubeFilterRequest:
    """``ExtenderArgs`` (filter, prioritize). ``Nodes`` absent and ``NodeNames`` present (a
    ``nodeCacheCapable: true`` extender) raises :class:`NodeCacheRefused`; a null node is skipped."""
    args = _decode(_ARGS, body)
    if args.Nodes is None:
        if args.NodeNames is not None:
            raise NodeCacheRefused("$.NodeNames")
        raise WireError("missing: expected the candidate nodes (a v1.NodeList); kube-scheduler sends them "
                        "with nodeCacheCapable: false", "$.Nodes")
    pod = _pod_view(args.Pod, "$.Pod")
    nodes = []
    for i, node in enumerate(args.Nodes.items or ()):
        if node is None:
            continue
        if not (node.metadata and node.metadata.name):
            raise WireError("missing: expected the node's name (metadata.name)", f"$.Nodes.items[{i}].metadata.name")
        nodes.append(KubeNodeView(node, NO_SESSION))
    return KubeFilterRequest(pod, nodes)


def decode_preemption_args(body: bytes, reads=None, env=NO_SESSION) -> KubePreemptRequest:
    """``ExtenderPreemptionArgs``; only ``NodeNameToMetaVictims`` (``nodeCacheCapable: true``)
    raises :class:`NodeCacheRefused`. A victim without a UID is a ``WireError``: the answer
    names victims by UID."""
    args = _decode(_PREEMPTION_ARGS, body)
    if args.NodeNameToVictims is None and args.NodeNameToMetaVictims is not None:
        raise NodeCacheRefused("$.NodeNameToMetaVictims")
    pod = _pod_view(args.Pod, "$.Pod")
    nodes = []
    for name, victims in (args.NodeNameToVictims or {}).items():
        path = f"$.NodeNameToVictims[{name!r}]"
        pods, uids = [], []
        for i, raw in enumerate((victims.Pods or ()) if victims is not None else ()):
            decoded = _decode(_POD, raw, f"{path}.Pods[{i}]")
            if decoded is None:
                continue
            uid = decoded.metadata.uid if decoded.metadata is not None else None
            if not uid:
                raise WireError("missing: expected the victim's UID (metadata.uid): the answer names "
                                "victims by UID", f"{path}.Pods[{i}].metadata.uid")
            pods.append(KubePodView(decoded, NO_SESSION))
            uids.append(uid)
        violations = victims.NumPDBViolations if victims is not None else None
        nodes.append(KubeNodeVictims(name, pods, uids, violations or 0))
    return KubePreemptRequest(pod, nodes)
