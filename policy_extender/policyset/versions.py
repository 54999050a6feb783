"""PolicyStore: the policy versions one worker has loaded.

The *current* version is the last good set the reloader (``reload.PolicyReloader``) handed over;
every onSessionOpen pins it for the whole scheduling cycle. Other workers (or replicas) may have
opened a session on a version this worker never loaded, so compiled versions are cached by their
content hash, and an unknown version is compiled from the sources the session store kept at open.
A cycle therefore always runs on one version, whichever worker answers.

``LastGoodCopy`` keeps the sources of the last good set on disk for workers that start later.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
import threading
import time
from typing import Any, Callable

from cachetools import LRUCache

from policy_extender.decide.policy_set import PolicySet
from policy_extender.policyset.compile import compile_sources

log = logging.getLogger("policy_extender.store")  # the name the docs and log configs use

#: Compiled versions kept per worker besides the current one (old sessions, other replicas).
CACHE_SIZE = 16


class UnknownPolicyVersion(LookupError):
    """A session is pinned to a version whose sources no store holds."""


class PolicyStore:
    """The current policy set and compiled versions by hash (thread-safe)."""

    def __init__(self, compile: Callable[[dict[str, str]], Any] = compile_sources) -> None:
        self._compile = compile
        self._lock = threading.Lock()
        self._by_version: LRUCache = LRUCache(CACHE_SIZE)
        self.current: PolicySet | None = None

    def activate(self, policy_set: PolicySet) -> None:
        """Make ``policy_set`` current (the reloader's ``on_change``): the next open pins it."""
        with self._lock:
            self._by_version[policy_set.version] = policy_set
            self.current = policy_set

    def pinned(self, version: str, sources_of: Callable[[str], dict[str, str] | None]) -> PolicySet:
        """The policy set of ``version``, compiled from ``sources_of(version)`` if not cached."""
        current = self.current
        if current is not None and current.version == version:
            return current
        with self._lock:
            found = self._by_version.get(version)
        if found is not None:
            return found
        return self._compile_version(version, sources_of)

    def _compile_version(self, version: str, sources_of: Callable[[str], dict[str, str] | None]) -> PolicySet:
        sources = sources_of(version)
        if sources is None:
            raise UnknownPolicyVersion(f"session pinned to policy version {version}, whose sources "
                                       "the session store does not hold")
        policy_set = self._compile(sources)
        with self._lock:
            self._by_version[version] = policy_set
        log.info("compiled pinned policy version %s from the session store", version)
        return policy_set


class LastGoodCopy:
    """The sources of the last good policy set an instance served, in one file of its private
    runtime directory (``instance.LAST_GOOD_FILE``), so that a worker booting while the policy
    directories are broken serves that set instead of nothing (docs/reload.md).

    Every worker saves each set it activates from the directories; the master saves the set it
    checked at start. A save writes a temporary file beside the copy and renames it over the
    copy, so a reader sees the old copy or the new one, never a part. Saves of two workers may
    race; either result is a set this instance served, and every worker re-saves each new set.
    """

    FORMAT = 1

    def __init__(self, path: str) -> None:
        self.path = path

    def save(self, version: str, sources: dict[str, str]) -> None:
        """Replace the copy with ``sources`` (atomically). Never raises: a copy is a fallback."""
        data = {"format": self.FORMAT, "version": version, "saved_at": time.time(),
                "saved_by": os.getpid(), "sources": dict(sources)}
        directory = os.path.dirname(self.path) or "."
        try:
            fd, temporary = tempfile.mkstemp(prefix=".last-good-", dir=directory)
            with os.fdopen(fd, "w", encoding="utf-8") as stream:
                json.dump(data, stream)
            os.replace(temporary, self.path)
        except OSError as exc:
            log.warning("could not save the last good policy set %s to %s (%s): a worker that "
                        "starts while the policy files are broken will not be able to serve it",
                        version, self.path, exc)

    def load(self) -> tuple[str, dict[str, str]] | None:
        """(version, sources) of the copy, or None when there is none (or it is unreadable)."""
        try:
            with open(self.path, encoding="utf-8") as stream:
                data = json.load(stream)
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            log.error("the last good policy set copy %s is unreadable (%s); ignoring it", self.path, exc)
            return None
        sources = data.get("sources") if isinstance(data, dict) else None
        if not isinstance(sources, dict) or not all(isinstance(v, str) for v in sources.values()):
            log.error("the last good policy set copy %s has no sources; ignoring it", self.path)
            return None
        return str(data.get("version")), {str(k): v for k, v in sources.items()}
