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

The same marker covers a restart of the whole service mid-cycle with the default ``sqlite:``
store, whose file lives in the instance's runtime directory: the new instance takes over the
file of the instance it replaced (instance.py, ``previous-sessions.sqlite3``), and the first of
its workers to start reads it (:func:`inherit_previous`): a session still open there is marked
lost, so every worker answers 503 for it until the next onSessionOpen (or its TTL), instead of
deciding without it.
"""

from __future__ import annotations

import json
import logging
import os
import time

from policy_extender.instance import PREVIOUS_STORE_FILE
from policy_extender.session.sqlite import open_session_in

log = logging.getLogger("policy_extender.session")

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


def inherit_previous(runtime_dir: str, marker: LostMarker) -> str | None:
    """Read the store of the instance this one replaced, once (the first worker to rename it
    takes it), and mark its open session lost; that session's id, or None."""
    previous = os.path.join(runtime_dir, PREVIOUS_STORE_FILE)
    claimed = f"{previous}.{os.getpid()}"
    try:
        os.rename(previous, claimed)  # the claim: one worker's rename succeeds
    except OSError:
        return None  # none to take over, or another worker claimed it
    for suffix in ("-wal", "-shm"):  # its WAL goes with it (committed pages may be there only)
        try:
            os.rename(previous + suffix, claimed + suffix)
        except FileNotFoundError:
            pass
    try:
        found = open_session_in(claimed)
        if found is not None:
            session_id, seconds = found
            marker.mark(session_id, time.time() + seconds)
            log.error("session %s was open in the instance this one replaced (the service restarted "
                      "mid-cycle): answering errors for it until the next onSessionOpen, so that "
                      "extender.ignorable decides", session_id)
            return session_id
        return None
    finally:
        for suffix in ("", "-wal", "-shm"):
            try:
                os.remove(claimed + suffix)
            except FileNotFoundError:
                pass
