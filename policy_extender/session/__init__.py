"""Shared per-cycle session state: the stores (SQLite default, Redis) and the per-worker cache.
May import wire, verb_names, store_url, instance, process, logs, metrics and errors; never lang, decide,
policyset, service or web.

See docs/architecture.md ("SessionStore", "Env"). Import ``RedisStore`` from
``policy_extender.session.redis``; it is not imported here so the SQLite path needs no redis.
"""

from policy_extender.session.allocation import Allocation, AllocationRecord, decode_allocation, encode_allocation
from policy_extender.session.cache import SessionCache
from policy_extender.session.env import SessionEnv
from policy_extender.session.sqlite import SqliteStore, default_path
from policy_extender.session.store import DEFAULT_TTL_SECONDS, Head, SessionCounts, SessionStore

__all__ = [
    "Allocation", "AllocationRecord", "DEFAULT_TTL_SECONDS", "Head", "SessionCache",
    "SessionCounts", "SessionEnv", "SessionStore", "SqliteStore", "decode_allocation", "default_path",
    "encode_allocation",
]
