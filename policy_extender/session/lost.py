"""LostMarker: a lost session, as one worker found it, told to every worker of its instance.

Only a worker that had read the open session can tell that the store lost it (the store
restarted empty, its file was replaced: ``SessionCache._no_session_now``). A worker that had not
read it yet finds no session and would decide without it, answering 200 where its neighbours
answer 503. So the worker that finds the loss writes a marker in the instance's runtime
directory (instance.py), ``session-lost``: the lost session's id and the time it would have
expired. A worker reads it only when it finds no session, or before it loads another session
(once per cycle), never on the common path:

- no session in the store and a marker that holds: the call fails with ``SessionLost`` (503);
- the store names the lost session again: the same;
- the store names another session (the next onSessionOpen, here or on another replica): that
  is the new cycle, and the marker is removed; an onSessionOpen answered by this instance
  removes it too.

The marker stops holding when the lost session would have expired (``opened_at +
session_ttl``), so one left behind by a race never outlives that.
"""

from __future__ import annotations

import json
import os
import time

#: the marker's name in the instance's runtime directory
LOST_FILE = "session-lost"


class LostMarker:
    """The ``session-lost`` file of one instance (see the module docstring)."""

    def __init__(self, path: str) -> None:
        self.path = path

    def mark(self, session_id: str, until: float) -> None:
        """Record that ``session_id`` was lost; the marker holds until ``until`` (epoch seconds).
        Written whole, then renamed: a reader sees the old marker, none, or this one."""
        temporary = f"{self.path}.{os.getpid()}.new"
        with open(temporary, "w", encoding="utf-8") as stream:
            json.dump({"session": session_id, "until": until}, stream)
        os.replace(temporary, self.path)

    def lost(self) -> str | None:
        """The id of the lost session while the marker holds, else None."""
        try:
            with open(self.path, encoding="utf-8") as stream:
                marker = json.load(stream)
        except FileNotFoundError:
            return None
        except (OSError, ValueError):
            return None  # unreadable: the workers that had the session still answer 503
        if not isinstance(marker, dict) or time.time() >= float(marker.get("until") or 0):
            return None
        return str(marker.get("session"))

    def clear(self) -> None:
        """A new session is the cycle now: remove the marker."""
        try:
            os.remove(self.path)
        except FileNotFoundError:
            pass
