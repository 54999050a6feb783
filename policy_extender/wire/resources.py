"""``Resources`` and ``Counts``: resource amounts in whole units, as policies see them.

Volcano's ``Resource`` objects carry CPU in millicores, memory in bytes and every scalar resource
x1000 except ``pods``; Kubernetes ResourceLists carry quantity strings. Both become the same
``Resources``: ``cpu`` in cores, ``memory`` in bytes, ``gpu`` in devices, ``pods`` plain, any other
resource by its full name (``r["nvidia.com/gpumem"]``), and 0 for anything not there.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Iterable, Mapping

from .. import schema
from .paths import PLAIN_SCALARS
from .quantity import parse_quantity, whole

_SHORTHANDS = schema.RESOURCE_SHORTHANDS


def field_of(obj, key: str):
    """``obj.key`` for a decoded Struct, ``obj[key]`` for a plain dict, None when absent."""
    if obj is None:
        return None
    if isinstance(obj, dict):
        return obj.get(key)
    return getattr(obj, key, None)


class Resources:
    """Resource amounts in whole units; attribute per shorthand, brackets for any name."""

    __slots__ = ("_amounts",)

    def __init__(self, amounts: Mapping[str, int | float] | None = None):
        self._amounts = dict(amounts or {})

    @classmethod
    def from_wire(cls, resource) -> Resources:
        """From Volcano's api.Resource (a decoded Struct or a dict): milli units -> whole units."""
        if resource is None:
            return EMPTY
        if isinstance(resource, dict):
            milli_cpu, memory = resource.get("MilliCPU"), resource.get("Memory")
            scalars = resource.get("ScalarResources")
        else:  # the decoded structs.Resource (or a pruned Struct): attributes, possibly absent
            milli_cpu, memory = getattr(resource, "MilliCPU", None), getattr(resource, "Memory", None)
            scalars = getattr(resource, "ScalarResources", None)
        amounts = {"cpu": whole((milli_cpu or 0) / 1000), "memory": whole(memory or 0)}
        if scalars:
            for name, value in scalars.items():
                amounts[name] = _scalar(name, value)
        return cls(amounts)

    @classmethod
    def from_quantities(cls, quantities) -> Resources:
        """From a Kubernetes ResourceList ``{"cpu": "500m", "memory": "4Gi"}`` (whole units)."""
        if not quantities:
            return EMPTY
        return cls({name: parse_quantity(v) for name, v in quantities.items() if v is not None})

    def __getitem__(self, name: str) -> int | float:
        return self._amounts.get(_SHORTHANDS.get(name, name), 0)

    def get(self, name: str, default=0):
        return self._amounts.get(_SHORTHANDS.get(name, name), default)

    def as_dict(self) -> dict[str, int | float]:
        """The non-zero amounts by full resource name."""
        return {k: v for k, v in self._amounts.items() if v}

    def __eq__(self, other) -> bool:
        return isinstance(other, Resources) and self.as_dict() == other.as_dict()

    def __hash__(self):
        return hash(frozenset(self.as_dict().items()))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.as_dict()!r})"

    cpu = property(lambda self: self._amounts.get("cpu", 0), doc="CPU in cores")
    memory = property(lambda self: self._amounts.get("memory", 0), doc="memory in bytes")
    gpu = property(lambda self: self._amounts.get("nvidia.com/gpu", 0), doc="nvidia.com/gpu devices")
    pods = property(lambda self: self._amounts.get("pods", 0), doc="pod slots")
    ephemeral_storage = property(lambda self: self._amounts.get("ephemeral-storage", 0),
                                 doc="ephemeral-storage in bytes")


EMPTY = Resources()


def amount_from_wire(resource, name: str) -> int | float:
    """``Resources.from_wire(resource)[name]`` for one full resource name, without converting the
    others: a rule reading ``node.idle.gpu`` pays for one amount, not for every resource."""
    if resource is None:
        return 0
    scalars = field_of(resource, "ScalarResources")
    if scalars:
        value = scalars.get(name, _ABSENT)
        if value is not _ABSENT:  # a scalar wins, as it does in from_wire's loop
            return _scalar(name, value)
    if name == "cpu":
        return whole((field_of(resource, "MilliCPU") or 0) / 1000)
    if name == "memory":
        return whole(field_of(resource, "Memory") or 0)
    return 0


_ABSENT = object()
#: ``int(x)`` of an integral float, as a builtin function call (20 ns) rather than a type call (70 ns)
_trunc = math.trunc


def amount_reader(key: str, name: str):
    """``raw -> amount_from_wire(field_of(raw, key), name)`` as one function: what a rule's
    ``node.idle.gpu`` runs on every call (``View.raw_amount_reader``), the steps inline.

    A decoded Struct holding a ``structs.Resource`` (the wire path) is read with one C call
    (``attrgetter("Idle.ScalarResources")``) and its float amount converted inline: about 40
    % of the generic read's instructions, which a predicate pays once per amount a rule reads.
    Anything else (a dict, a null resource, a raw without the field, a pruned Struct) raises
    AttributeError there and takes the generic read, so both give the same value and type
    (tests/wire/test_resources.py)."""
    plain, cpu, memory = name in PLAIN_SCALARS, name == "cpu", name == "memory"
    scalars_of = operator.attrgetter(key + ".ScalarResources")
    own_of = operator.attrgetter(key + (".MilliCPU" if cpu else ".Memory")) if cpu or memory else None

    def generic(raw):
        resource = raw.get(key) if isinstance(raw, dict) else getattr(raw, key, None)
        if resource is None:
            return 0
        is_dict = isinstance(resource, dict)
        scalars = resource.get("ScalarResources") if is_dict else getattr(resource, "ScalarResources", None)
        if scalars:
            value = scalars.get(name, _ABSENT)
            if value is not _ABSENT:  # a scalar wins, as it does in from_wire's loop
                value = value or 0
                if not plain:
                    value = value / 1000
                return int(value) if float(value).is_integer() else value
        if cpu:
            return whole(((resource.get("MilliCPU") if is_dict else getattr(resource, "MilliCPU", None)) or 0) / 1000)
        if memory:
            return whole((resource.get("Memory") if is_dict else getattr(resource, "Memory", None)) or 0)
        return 0

    def read(raw):
        try:
            scalars = scalars_of(raw)
        except AttributeError:  # not a Struct holding a Resource: the generic read
            return generic(raw)
        if scalars:
            value = scalars.get(name, _ABSENT)
            if value is not _ABSENT:  # a scalar wins, as it does in from_wire's loop
                if type(value) is not float:  # null, or a Struct typed otherwise
                    return generic(raw)
                if not plain:
                    value = value / 1000
                return _trunc(value) if value.is_integer() else value
        if own_of is None:
            return 0
        try:
            own = own_of(raw)
        except AttributeError:
            return generic(raw)
        if type(own) is not float:  # null (0) or a Struct typed otherwise
            return generic(raw)
        if cpu:
            own = own / 1000
        return _trunc(own) if own.is_integer() else own
    return read


def _scalar(name: str, value) -> int | float:
    """One of a Resource's ``ScalarResources`` in whole units (x1000 on the wire except ``pods``)."""
    value = value or 0
    return whole(value if name in PLAIN_SCALARS else value / 1000)


def add_amounts(total: dict[str, int | float], amounts: Mapping[str, int | float]) -> None:
    """Add ``amounts`` (whole units, full or shorthand names) into ``total`` in place."""
    for name, value in amounts.items():
        name = _SHORTHANDS.get(name, name)
        total[name] = whole(total.get(name, 0) + value)


class Counts(Resources):
    """What was allocated in this scheduling cycle: a number of tasks and their resources."""

    __slots__ = ("tasks",)

    def __init__(self, tasks: int = 0, amounts: Mapping[str, int | float] | None = None):
        super().__init__(amounts)
        self.tasks = tasks

    @classmethod
    def from_allocations(cls, allocations: Iterable) -> Counts:
        """Sum allocations ``(task_uid, job_uid, queue_name, node_name, resources)``; resources is
        a mapping of whole units (or a ``Resources``)."""
        tasks = 0
        total: dict[str, int | float] = {}
        for allocation in allocations:
            tasks += 1
            add_amounts(total, _amounts_of(allocation[4]))
        return cls(tasks, total)

    def __eq__(self, other) -> bool:
        return isinstance(other, Counts) and self.tasks == other.tasks and super().__eq__(other)

    __hash__ = Resources.__hash__

    def __repr__(self) -> str:
        return f"Counts(tasks={self.tasks}, {self.as_dict()!r})"


def _amounts_of(resources) -> Mapping[str, int | float]:
    return resources._amounts if isinstance(resources, Resources) else (resources or {})


NO_COUNTS = Counts()
