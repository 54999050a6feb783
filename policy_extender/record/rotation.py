"""The size cap of a recording directory: whole cycles deleted, oldest first.

Cycle directories are named ``<opened-at UTC>-<session id>``, so their names sort in time order.
Several workers may enforce the cap at once: a cycle another worker already deleted is skipped.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path


def cycle_sizes(directory: str) -> list[tuple[str, int]]:
    """(cycle name, bytes) of every cycle directory, oldest first."""
    sizes = []
    try:
        entries = sorted(os.scandir(directory), key=lambda entry: entry.name)
    except FileNotFoundError:
        return []
    for entry in entries:
        if entry.is_dir(follow_symlinks=False):
            sizes.append((entry.name, _size_of(entry.path)))
    return sizes


def _size_of(path: str) -> int:
    total = 0
    try:
        for entry in os.scandir(path):
            try:
                total += entry.stat(follow_symlinks=False).st_size
            except FileNotFoundError:
                continue
    except FileNotFoundError:
        return 0
    return total


def enforce_cap(directory: str, max_bytes: int, keep: frozenset[str] = frozenset()) -> list[str]:
    """Delete the oldest cycles (never those in ``keep``) until the total is under ``max_bytes``;
    returns the names deleted. ``max_bytes`` 0 means no cap."""
    if max_bytes <= 0:
        return []
    sizes = cycle_sizes(directory)
    total = sum(size for _, size in sizes)
    deleted = []
    for name, size in sizes:
        if total <= max_bytes:
            break
        if name in keep:
            continue
        shutil.rmtree(Path(directory) / name, ignore_errors=True)
        total -= size
        deleted.append(name)
    return deleted
