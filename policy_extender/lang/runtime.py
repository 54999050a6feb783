"""The runtime: the evaluation ``Context`` (the roots one evaluation reads), and the value
semantics shared by the compiler and the builtins: exact equality, ordering that is false across
types, bounds that raise ``EvalError``, and how values print in explanations."""

from __future__ import annotations

from typing import Any

import msgspec

from policy_extender.errors import EvalError
from policy_extender.lang import budget, codes

MAX_NUMBER = 2**63            # |a number| beyond this is an error (Go's int64 range)
MAX_LENGTH = 65536            # characters of a built string, elements of a built list
MAX_ITERATIONS = 100_000      # elements an aggregate may visit
MAX_WORK = budget.MAX_WORK    # elements one call may visit (aggregates, list operations): lang/budget.py


def is_number(value: object) -> bool:
    return type(value) is int or type(value) is float


def kind(value: object) -> str:
    """A coarse run-time type: number, string, bool, list, map, null or object."""
    if value is None:
        return "null"
    if type(value) is bool:
        return "bool"
    if is_number(value):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "list"
    if isinstance(value, dict):
        return "map"
    return "object"


def equal(a: Any, b: Any) -> bool:
    """``==``: exact, null equals only null, values of different types are unequal."""
    if a is None or b is None:
        return a is b
    ka, kb = kind(a), kind(b)
    if ka != kb:
        return False
    if ka == "list":
        return len(a) == len(b) and all(equal(x, y) for x, y in zip(a, b))
    if ka == "object":
        return a is b
    return a == b


def ordered(a: object, b: object) -> bool:
    """Whether ``a`` and ``b`` can be ordered: both numbers or both strings."""
    if is_number(a):
        return is_number(b)
    return isinstance(a, str) and isinstance(b, str)


def contains(container: object, item: object) -> bool | None:
    """``item in container`` for strings (substring), lists (an equal element), maps (a key)."""
    if container is None:
        return None
    if isinstance(container, str):
        return isinstance(item, str) and item in container
    if isinstance(container, dict):
        return isinstance(item, str) and item in container
    if isinstance(container, list):
        return any(equal(x, item) for x in container)
    return None


def number(value: Any, span=None) -> object:
    """``value`` if it is within bounds (None passes through)."""
    if value is not None and not -MAX_NUMBER <= value <= MAX_NUMBER:
        raise EvalError(codes.E510, f"number out of range (limit 2^63): {fmt(value)}", span)
    return value


def sized(value: Any, span=None) -> object:
    """``value`` (a string or list) if it is within MAX_LENGTH."""
    if value is not None and len(value) > MAX_LENGTH:
        raise EvalError(codes.E511, f"result of {len(value)} elements is longer than {MAX_LENGTH}", span)
    return value


def iterable(value: object, span=None) -> list:
    """The elements an aggregate visits: list elements (null → none), bounded."""
    if not isinstance(value, list):
        return []
    bounded(len(value), span)
    return value


def bounded(size: int, span=None) -> None:
    """An aggregate over ``size`` elements is allowed (MAX_ITERATIONS), or raises E512."""
    if size > MAX_ITERATIONS:
        raise EvalError(codes.E512, f"aggregate over {size} elements (limit {MAX_ITERATIONS})", span)


def cost(value: object) -> int:
    """What visiting ``value`` costs against MAX_WORK: list/map elements, string characters / 64."""
    if isinstance(value, (list, dict)):
        return len(value)
    if isinstance(value, str):
        return len(value) >> 6
    return 0


def fmt(value: object, limit: int = 80) -> str:
    """How a value prints in an explanation: JSON-like, numbers without a needless ``.0``."""
    text = _fmt(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _fmt(value: object) -> str:
    if value is None:
        return "null"
    if value is True or value is False:
        return "true" if value else "false"
    if type(value) is float:
        return str(int(value)) if value.is_integer() and abs(value) < 1e16 else repr(value)
    if type(value) is int:
        return str(value)
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, list):
        return "[" + ", ".join(_fmt(v) for v in value[:10]) + (", ...]" if len(value) > 10 else "]")
    if isinstance(value, dict):
        items = list(value.items())[:10]
        return "{" + ", ".join(f"{_fmt(k)}: {_fmt(v)}" for k, v in items) + "}"
    return f"<{type(value).__name__.removesuffix('View').lower()}>"


def text(value: object) -> str:
    """How a value prints inside a reason template: strings bare, the rest as ``fmt``."""
    return value if isinstance(value, str) else fmt(value, limit=200)


_UNSET = object()


class Context(msgspec.Struct, gc=False):
    """The roots one evaluation reads. ``job``, ``queue``, ``session`` and ``cluster`` are computed on first use
    (``_job``, ``_queue``: pass the job or queue when the call has one).

    ``vars`` holds the aggregates' loop variables, one slot each (``[None] * slots``). A msgspec
    Struct: every predicate call builds one, and its ``__init__`` runs in C (90 ns against 420 ns
    for a class with ``__slots__`` and a Python ``__init__``). Not tracked by the GC: it refers to
    the roots, nothing refers back to it."""

    env: Any
    vars: list
    task: Any = None
    node: Any = None
    evictor: Any = None
    evictee: Any = None
    budget: Any = None  # the call's Budget (lang/budget.py), taken on the first charge (compiler._charge)
    _job: Any = _UNSET
    _queue: Any = _UNSET
    _session: Any = _UNSET
    _cluster: Any = _UNSET

    @property
    def job(self):
        if self._job is _UNSET:
            owner = self.task if self.task is not None else self.evictor
            self._job = owner.job if owner is not None else None
        return self._job

    @property
    def queue(self):
        if self._queue is _UNSET:
            job = self.job
            self._queue = job.queue if job is not None else None
        return self._queue

    @property
    def session(self):
        if self._session is _UNSET:
            self._session = self._open_session()
        return self._session

    @property
    def cluster(self):
        if self._cluster is _UNSET:
            self._cluster = self.env.cluster_view()
        return self._cluster

    def _open_session(self):
        job, node = self.job, self.node if self.node is not None else self.evictee
        job_uid = job.uid if job is not None else (self.task.job_id if self.task is not None else None)
        queue = self.queue
        queue_name = queue.name if queue is not None else (job.queue_name if job is not None else None)
        return self.env.session_view(job_uid, queue_name, getattr(node, "name", None) or getattr(node, "node_name", None))
