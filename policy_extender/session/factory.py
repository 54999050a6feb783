"""Turn the ``--session-store`` setting into a store: ``sqlite:[PATH]``, ``redis://...`` or
``redis+sentinel://...``."""

from __future__ import annotations

from policy_extender.store_url import SCHEME as SENTINEL_SCHEME
from policy_extender.session.store import DEFAULT_TTL_SECONDS, SessionStore


def open_store(spec: str, ttl_seconds: float = DEFAULT_TTL_SECONDS,
               redis_timeout: float | None = None, redis_wait_replicas: int = 0,
               redis_wait_timeout: float | None = None) -> SessionStore:
    """``sqlite:`` (default file), ``sqlite:/path/file``, ``redis://host:port/db``, ``rediss://``,
    or ``redis+sentinel://host:port,host:port/master/db`` (store_url.py)."""
    # Each store is imported only when named: a SQLite deployment never imports redis-py
    # (120 ms and its memory in every worker, measured with ``python -X importtime``).
    if spec.startswith("sqlite:"):
        from policy_extender.session.sqlite import SqliteStore
        return SqliteStore(spec[len("sqlite:"):] or None, ttl_seconds=ttl_seconds)
    if spec.startswith(("redis://", "rediss://", "unix://", SENTINEL_SCHEME)):
        from policy_extender.session.redis import (DEFAULT_TIMEOUT, DEFAULT_WAIT_TIMEOUT, RedisStore,
                                                   SentinelStore)
        kind = SentinelStore if spec.startswith(SENTINEL_SCHEME) else RedisStore
        return kind(spec, ttl_seconds=ttl_seconds,
                    timeout=DEFAULT_TIMEOUT if redis_timeout is None else redis_timeout,
                    wait_replicas=redis_wait_replicas,
                    wait_timeout=DEFAULT_WAIT_TIMEOUT if redis_wait_timeout is None else redis_wait_timeout)
    raise ValueError(f"session store {spec!r}: expected `sqlite:PATH`, `sqlite:` for the default "
                     "file, a `redis://HOST:PORT/DB` URL or a "
                     "`redis+sentinel://HOST:PORT,HOST:PORT/MASTER/DB` address")
