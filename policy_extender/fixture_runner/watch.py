"""``test --watch``: run the fixtures again each time a file under the watched paths is saved.

Polling the files' (inode, size, mtime) every ``interval`` seconds is enough for an editor's save
(written in place or renamed over) and needs nothing but the standard library; a save that
changes nothing the signature sees (same size within one mtime tick) is the only one missed.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

#: Suffixes of the files whose save starts a run: fixtures, policies, values and raw bodies.
WATCHED_SUFFIXES = (".policy", ".yaml", ".yml", ".json")


def signature(paths) -> dict[str, tuple[int, int, int]]:
    """{file: (inode, size, mtime)} of the watched files under ``paths`` (files, or directories
    searched recursively, hidden entries skipped)."""
    found: dict[str, tuple[int, int, int]] = {}
    for file in (f for path in map(Path, paths) for f in _files(path)):
        try:
            st = file.stat()
        except FileNotFoundError:
            continue
        found[str(file)] = (st.st_ino, st.st_size, st.st_mtime_ns)
    return found


def _files(path: Path) -> list[Path]:
    if path.is_file():
        return [path]
    files = []
    for parent, directories, names in os.walk(path):
        directories[:] = [d for d in directories if not d.startswith(".")]
        files += [Path(parent) / name for name in names if not name.startswith(".") and name.endswith(WATCHED_SUFFIXES)]
    return files


def watch(paths, run: Callable[[], object], interval: float = 0.3, stop: threading.Event | None = None,
          out=None) -> int:
    """Call ``run`` now, then again after each change of ``paths``' files, until ``stop`` is set
    (or Ctrl-C); returns how many runs were made."""
    out = out or sys.stdout
    stop = stop or threading.Event()
    runs = 0
    while True:
        seen = signature(paths)
        run()
        runs += 1
        print(f"policy-extender test --watch: waiting for a change in {', '.join(map(str, paths))} (Ctrl-C stops)",
              file=out, flush=True)
        while seen == signature(paths):
            if stop.wait(interval):
                return runs
        time.sleep(min(interval, 0.1))  # an editor's save is often two writes: let it finish
        print("policy-extender test --watch: changed, running again", file=out, flush=True)
