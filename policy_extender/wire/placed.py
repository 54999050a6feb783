"""The part of an allocate/deallocate event's task that its record keeps, for this cycle's views.

A rule reads a task placed this cycle through ``session.allocations`` (``a.labels``) and through
the node it was placed on (``n.tasks`` of ``cluster.nodes``). The record keeps what those reads
need (the policy set's ``placed`` paths, ``paths.placed_paths``) and what the service needs of
every task (``paths.ALWAYS_READ``), in Go keys as Volcano sent them, so that a ``TaskView`` over
it reads as one over the event's own task. Nothing else: a cycle of thousands of allocations
keeps no pod it does not read.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import msgspec

from .paths import ALWAYS_READ, EVENT_READ, WirePath


def kept_task(raw: Any, paths: Iterable[WirePath] | None) -> dict[str, Any]:
    """``raw`` (a decoded task: a pruned Struct or a dict) as a dict of Go keys holding only the
    values at ``paths`` and at ``ALWAYS_READ``'s and ``EVENT_READ``'s task paths (a path ending
    in a value keeps it whole; nulls are left out)."""
    whole = msgspec.to_builtins(raw) if not isinstance(raw, dict) else raw
    kept: dict[str, Any] = {}
    for path in (*ALWAYS_READ["task"], *EVENT_READ, *(paths or ())):
        _copy(whole, kept, path)
    return kept


def _copy(source: Any, target: dict, path: WirePath) -> None:
    for key in path[:-1]:
        source = source.get(key) if isinstance(source, dict) else None
        if source is None or key == "*":
            return  # no collection inside a task is read element by element
        target = target.setdefault(key, {})
        if not isinstance(target, dict):
            return
    value = source.get(path[-1]) if isinstance(source, dict) else None
    if value is not None:
        target[path[-1]] = value
