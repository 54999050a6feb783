"""Turn the ``--session-store`` setting into a store, through the scheme registry
(``store_url.SCHEMES``: ``sqlite:[PATH]``, ``redis://...``, ``rediss://...``, ``unix://...``,
``redis+sentinel://...``) that config.py checks the setting with."""

from __future__ import annotations

import importlib
from typing import cast

from policy_extender.session.store import DEFAULT_TTL_SECONDS, SessionStore, StoreOptions
from policy_extender.store_url import StoreScheme, scheme_of


def open_store(setting: str, ttl_seconds: float = DEFAULT_TTL_SECONDS,
               redis_timeout: float | None = None, redis_wait_replicas: int = 0,
               redis_wait_timeout: float | None = None) -> SessionStore:
    """The store ``setting`` names, opened with the options given (None: the store's default);
    ValueError, listing the forms known, for a setting no registered kind takes."""
    options = StoreOptions(ttl_seconds, redis_timeout, redis_wait_replicas, redis_wait_timeout)
    return store_class(scheme_of(setting)).from_setting(setting, options)


def store_class(scheme: StoreScheme) -> type[SessionStore]:
    """The class of a registered kind, imported now: only the kind a setting names is ever
    imported (a SQLite deployment never imports redis-py)."""
    module, _, name = scheme.store.partition(":")
    return cast("type[SessionStore]", getattr(importlib.import_module(module), name))
