"""The part of an allocate/deallocate event's task that its record keeps, for this cycle's views.

A rule reads a task placed this cycle through ``session.allocations`` (``a.labels``) and through
the node it was placed on (``n.tasks`` of ``cluster.nodes``). The record keeps what those reads
need (the policy set's ``placed`` paths, ``paths.placed_paths``), in Go keys as Volcano sent them,
so that a ``TaskView`` over it (with the record's own UID, job, node and status put back,
``session_views.AllocationView.task_raw``) reads as one over the event's own task. Nothing else:
a set that reads none of it keeps none, and a cycle of thousands of allocations keeps no pod it
does not read.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import msgspec

from .paths import WirePath
from .structs import attr_name


def kept_task(raw: Any, paths: Iterable[WirePath] | None) -> dict[str, Any] | None:
    """The values of ``raw`` (a decoded task: a pruned Struct or a dict) at ``paths``, as a dict
    of Go keys (a path ending in a value keeps it whole; absent and null values are left out), or
    None when it keeps nothing."""
    kept: dict[str, Any] = {}
    for path in paths or ():
        _copy(raw, kept, path)
    return kept or None


def _step(value: Any, key: str) -> Any:
    if isinstance(value, dict):
        return value.get(key)
    return getattr(value, attr_name(key), None)


def _copy(source: Any, target: dict, path: WirePath) -> None:
    for key in path:
        if key == "*":
            return  # a task holds no collection read element by element
        source = _step(source, key)
        if source is None:
            return
    for key in path[:-1]:
        found = target.setdefault(key, {})
        if not isinstance(found, dict):
            return  # a shorter path kept this value whole already
        target = found
    if path[-1] not in target:
        target[path[-1]] = msgspec.to_builtins(source)


def status_of(raw: Any) -> int:
    """The event task's TaskStatus number (0: not sent)."""
    status = _step(raw, "Status")
    return status if isinstance(status, int) else 0
