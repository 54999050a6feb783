"""Turn the ``--session-store`` setting into a store: ``sqlite:[PATH]`` or ``redis://...``."""

from __future__ import annotations

from policy_extender.session.store import DEFAULT_TTL_SECONDS, SessionStore


def open_store(spec: str, ttl_seconds: float = DEFAULT_TTL_SECONDS,
               redis_timeout: float | None = None) -> SessionStore:
    """``sqlite:`` (default file), ``sqlite:/path/file``, ``redis://host:port/db`` or ``rediss://``."""
    # Each store is imported only when named: a SQLite deployment never imports redis-py
    # (120 ms and its memory in every worker, measured with ``python -X importtime``).
    if spec.startswith("sqlite:"):
        from policy_extender.session.sqlite import SqliteStore
        return SqliteStore(spec[len("sqlite:"):] or None, ttl_seconds=ttl_seconds)
    if spec.startswith(("redis://", "rediss://", "unix://")):
        from policy_extender.session.redis import DEFAULT_TIMEOUT, RedisStore
        return RedisStore(spec, ttl_seconds=ttl_seconds,
                          timeout=DEFAULT_TIMEOUT if redis_timeout is None else redis_timeout)
    raise ValueError(f"session store {spec!r}: expected `sqlite:PATH`, `sqlite:` for the default "
                     "file, or a `redis://HOST:PORT/DB` URL")
