"""The ``--session-store`` setting, read without importing any store: the scheme registry (which
kind of store a setting names) and the Sentinel address. config.py checks the setting with it at
start, session/factory.py opens the store it names, and tests/session runs the store contract
suite against every kind it lists.

``SCHEMES`` is the one list of store kinds. Each names its store class as ``module:Class``,
imported only when a setting names it: a SQLite deployment never imports redis-py (120 ms and its
memory in every worker, measured with ``python -X importtime``), and this bottom-layer module
imports no store.

The Sentinel form:

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
from typing import Callable
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


# -- the scheme registry -----------------------------------------------------------------------


@dataclass(frozen=True)
class StoreScheme:
    """One kind of session store: the settings that name it and the class that serves it."""

    #: the kind's name (the contract suite in tests/session is parametrized by it)
    name: str
    #: what a setting of this kind starts with
    prefixes: tuple[str, ...]
    #: the setting's form, as the message refusing an unknown setting shows it
    form: str
    #: ``module:Class`` of the store, a ``session.store.SessionStore``; imported only when a
    #: setting names this kind (session/factory.py)
    store: str
    #: checks a setting of this kind without importing the store (ValueError naming what is
    #: wrong), so a malformed address fails at start; None: the store's client checks it
    check: Callable[[str], object] | None = None


#: Every kind of session store, in the order the refusal of an unknown setting lists them.
SCHEMES: tuple[StoreScheme, ...] = (
    StoreScheme("sqlite", ("sqlite:",), "sqlite:PATH", "policy_extender.session.sqlite:SqliteStore"),
    StoreScheme("redis", ("redis://", "rediss://", "unix://"), "redis://HOST:PORT/DB",
                "policy_extender.session.redis:RedisStore"),
    StoreScheme("redis+sentinel", (SCHEME,), FORM, "policy_extender.session.redis:SentinelStore",
                parse_sentinel_url),
)


def scheme_of(setting: str) -> StoreScheme:
    """The kind of store ``setting`` names (the longest prefix that matches), the setting
    checked; ValueError saying what is wrong or listing every form the registry knows."""
    found = [(len(prefix), scheme) for scheme in SCHEMES for prefix in scheme.prefixes
             if setting.startswith(prefix)]
    if not found:
        *others, last = [scheme.form for scheme in SCHEMES]
        listed = f"{', '.join(others)} or {last}" if others else last
        raise ValueError(f"expected {listed}, got {setting!r}")
    scheme = max(found, key=lambda match: match[0])[1]
    if scheme.check is not None:
        scheme.check(setting)
    return scheme
