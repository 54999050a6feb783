"""Noticing that policy directories changed: a hint to read them again (``files.read_snapshot``)."""

from __future__ import annotations

import os

from typing import Any


class DirectoryWatcher:
    """Calls ``wake()`` soon after anything changes in ``dirs`` (inotify through watchdog).

    Only a hint to poll now: the snapshot is always re-read and compared by digest, so a missed,
    doubled or odd event kind (they vary by platform) costs latency, never correctness. The
    watch is on the directories, not the files, because a watch on a file is lost when the
    kubelet removes it. When watchdog or inotify is unavailable (for example the per-user
    inotify instance limit is reached), ``start()`` returns False and polling alone remains.
    """

    def __init__(self, dirs: list[str], wake) -> None:
        self._dirs = dirs
        self._wake = wake
        self._observer: Any = None  # a watchdog Observer once started (watchdog is optional)

    def start(self) -> bool:
        try:  # optional: without watchdog (or inotify) polling alone remains
            from watchdog.events import FileSystemEventHandler
            from watchdog.observers import Observer
        except ImportError:
            return False
        wake = self._wake

        class WakeOnAnyEvent(FileSystemEventHandler):
            def on_any_event(self, event) -> None:
                if event.event_type not in ("opened", "closed_no_write"):
                    wake()

        observer = Observer()
        observer.daemon = True
        try:
            for directory in dict.fromkeys(map(_watched, self._dirs)):
                observer.schedule(WakeOnAnyEvent(), directory, recursive=False)
            observer.start()
        except OSError:
            return False
        self._observer = observer
        return True

    def stop(self) -> None:
        if self._observer is not None:
            self._observer.stop()
            self._observer.join(timeout=2)
            self._observer = None


def _watched(path: str) -> str:
    """The directory to watch for ``path``: itself, or a single file's (a set's values file)
    directory, which also sees the file replaced by a rename."""
    return path if os.path.isdir(path) or not os.path.exists(path) else os.path.dirname(os.path.abspath(path))
