"""The Sentinel form of ``--session-store``, parsed without importing redis-py (config.py checks it
at start, session/redis.py connects with it).

``redis+sentinel://[[USER]:PASSWORD@]HOST[:PORT][,HOST[:PORT]...]/MASTER[/DB][?sentinel_password=P]``

- HOST:PORT, comma-separated: the sentinels (port 26379 when left out; ``[::1]:26379`` for IPv6);
- MASTER: the name the sentinels monitor the master under (``sentinel monitor MASTER ...``);
- DB: the database number, 0 when left out;
- USER and PASSWORD: what the master and its replicas require (``requirepass``, or an ACL user);
- ``sentinel_password``: what the sentinels themselves require (``requirepass`` in sentinel.conf),
  when they do; it may differ from the master's.

Example: ``redis+sentinel://:s3cret@redis-sentinel.volcano-system.svc:26379/mymaster/0``.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import parse_qs, unquote

SCHEME = "redis+sentinel://"
DEFAULT_PORT = 26379
FORM = "redis+sentinel://[[USER]:PASSWORD@]HOST:PORT[,HOST:PORT...]/MASTER[/DB]"


@dataclass(frozen=True)
class SentinelAddress:
    sentinels: tuple[tuple[str, int], ...]
    master: str
    db: int = 0
    username: str | None = None
    password: str | None = None
    sentinel_password: str | None = None


def parse_sentinel_url(url: str) -> SentinelAddress:
    """The parts of a Sentinel URL; ValueError naming what is wrong and the expected form."""
    if not url.startswith(SCHEME):
        raise ValueError(f"expected {FORM}, got {url!r}")
    rest, _, query = url[len(SCHEME):].partition("?")
    netloc, _, path = rest.partition("/")
    userinfo, at, hosts = netloc.rpartition("@")
    username = password = None
    if at:
        user, colon, secret = userinfo.partition(":")
        username = unquote(user) or None
        password = unquote(secret) if colon else None
    sentinels = tuple(_host_port(part, url) for part in hosts.split(","))
    parts = [unquote(p) for p in path.split("/") if p]
    if not parts or len(parts) > 2:
        raise ValueError(f"{url!r}: expected the master's name and optionally the database after the "
                         f"sentinels ({FORM})")
    db = 0
    if len(parts) == 2:
        if not parts[1].isdigit():
            raise ValueError(f"{url!r}: the database must be a number, got {parts[1]!r}")
        db = int(parts[1])
    options = parse_qs(query, keep_blank_values=True)
    unknown = sorted(set(options) - {"sentinel_password"})
    if unknown:
        raise ValueError(f"{url!r}: unknown option {unknown[0]!r} (only sentinel_password)")
    sentinel_password = options["sentinel_password"][-1] if "sentinel_password" in options else None
    return SentinelAddress(sentinels, parts[0], db, username, password, sentinel_password)


def _host_port(text: str, url: str) -> tuple[str, int]:
    if text.startswith("["):  # [IPv6]:port
        host, _, after = text[1:].partition("]")
        port = after[1:] if after.startswith(":") else ""
    else:
        host, _, port = text.partition(":")
    if not host:
        raise ValueError(f"{url!r}: a sentinel's host is empty (expected {FORM})")
    if port and not port.isdigit():
        raise ValueError(f"{url!r}: a sentinel's port must be a number, got {port!r}")
    return host, int(port) if port else DEFAULT_PORT
