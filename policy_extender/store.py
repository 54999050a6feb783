"""PolicyStore: the policy versions one worker has loaded.

The *current* version is the last good set the reloader (``reload.PolicyReloader``) handed over;
every onSessionOpen pins it for the whole scheduling cycle. Other workers (or replicas) may have
opened a session on a version this worker never loaded, so compiled versions are cached by their
content hash, and an unknown version is compiled from the sources the session store kept at open.
A cycle therefore always runs on one version, whichever worker answers.
"""

from __future__ import annotations

import logging
import threading
from typing import Any, Callable

from cachetools import LRUCache

log = logging.getLogger(__name__)

#: Compiled versions kept per worker besides the current one (old sessions, other replicas).
CACHE_SIZE = 16


class UnknownPolicyVersion(LookupError):
    """A session is pinned to a version whose sources no store holds."""


def _compile_sources(sources: dict[str, str]) -> Any:
    from policy_extender.policy import compile_sources
    return compile_sources(sources)


class PolicyStore:
    """The current policy set and compiled versions by hash (thread-safe)."""

    def __init__(self, compile: Callable[[dict[str, str]], Any] = _compile_sources) -> None:
        self._compile = compile
        self._lock = threading.Lock()
        self._by_version: LRUCache = LRUCache(CACHE_SIZE)
        self.current: Any | None = None

    def activate(self, policy_set: Any) -> None:
        """Make ``policy_set`` current (the reloader's ``on_change``): the next open pins it."""
        with self._lock:
            self._by_version[policy_set.version] = policy_set
            self.current = policy_set

    def pinned(self, version: str, sources_of: Callable[[str], dict[str, str] | None]) -> Any:
        """The policy set of ``version``, compiled from ``sources_of(version)`` if not cached."""
        current = self.current
        if current is not None and current.version == version:
            return current
        with self._lock:
            found = self._by_version.get(version)
        if found is not None:
            return found
        return self._compile_version(version, sources_of)

    def _compile_version(self, version: str, sources_of: Callable[[str], dict[str, str] | None]) -> Any:
        sources = sources_of(version)
        if sources is None:
            raise UnknownPolicyVersion(f"session pinned to policy version {version}, whose sources "
                                       "the session store does not hold")
        policy_set = self._compile(sources)
        with self._lock:
            self._by_version[version] = policy_set
        log.info("compiled pinned policy version %s from the session store", version)
        return policy_set
