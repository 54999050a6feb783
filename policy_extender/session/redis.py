"""RedisStore: the session store for several replicas behind one Service.

Every change that touches several keys runs as one Lua script (atomic on the server), so an
allocate can never land in a session that another replica has just replaced. All keys share the
hash tag ``{<prefix>}`` so they live in one slot (the scripts also work on a Redis Cluster).

Keys (``P`` = ``{prefix}:``):
  ``P head``           hash sid, seq, version, opened_at, tip, master; PEXPIRE ttl  (the one read per
                       request; ``master``: behind Sentinel, the master the open was written to)
  ``P live``           the id of the last session opened and not closed     (to count expiries)
  ``P ended``          list of the last ENDED_KEPT session ids that were closed, replaced or expired
  ``P snapshot:<sid>`` the snapshot bytes; PEXPIRE ttl
  ``P alloc:<sid>``    hash task uid -> last event kind (``+``/``-``), net change + 1 (one digit),
                       record; PEXPIRE to the head's remaining ttl
  ``P log:<sid>``      list of changes, entry n-1 set seq to n: ``<tip>\0<uid>\0<net + 1><record>``
  ``P sources:<ver>``  JSON {file: text} of a policy version, written once; every open that pins it
                       sets its expiry to the session's TTL: a session pinned to it never outlives it, and a
                       version no open pins any more expires (a swap every second added one a second)
  ``P counts``         hash opened / closed / expired / replaced
  ``P lost``           the id of a session a worker found lost (``mark_lost``); PEXPIRE the rest of its TTL;
                       deleted by the next open or close
  ``P arrival``        hash issued (the last ``begin_open`` ticket), applied (the ticket of the last open
                       or close stored): opens and closes are ordered by arrival (store.py, ``begin_open``)
  ``P tally:cycles``   sorted set of the decision tally's kept cycles, by opened_at (tally.py)
  ``P tally:n:<cid>``  hash: the cycle's tally counts;  ``P tally:s:<cid>`` hash: its notes
  ``P tally:dropped``  hash cycle id -> entries dropped over the cap

Timeouts. Every call of a verb reads Redis, and Volcano waits ``extender.httpTimeout`` for the
answer: a Redis that does not answer (paused, black-holed, failing over) must fail the call
quickly, not hold a worker thread. So connections are made and read with ``timeout`` seconds (the
``redis_timeout`` option, 0.25 s by default). Opening and closing a session write and delete the
snapshot, which may be megabytes: those go through a second pool with ``session_timeout``
(``max(1 s, 4 x timeout)`` by default). A Redis that cannot be reached or does not answer in
time raises ``StoreUnavailable`` (the call answers 503), whatever redis-py raised.

Sentinel (``SentinelStore``, ``redis+sentinel://[[USER]:PASSWORD@]HOST:PORT,HOST:PORT,.../MASTER/DB``).
Every new connection asks the sentinels for the master with ``SENTINEL GET-MASTER-ADDR-BY-NAME``
(the first sentinel that answers; redis-py's own discovery reads ``SENTINEL MASTERS``, which during
the failover leader's reconf-slaves phase still names the demoted master), and then asks the
server it reached for its ``ROLE``: a server that is not a master (the old master restarted as a
replica at the same address) is refused, the connection dropped, and that address passed over
for ``REFUSED_SECONDS`` in favour of a sentinel that names another one. Replication is
asynchronous, so a failover may lose the last writes: the open of the cycle, or allocate events
already answered 200. The cache's history checks (tips, ended ids) see a loss only in a worker
that had read the lost writes; a worker or replica that had not would decide with what is left.
So every open stamps the head with the address of the server it was written to (the connection
that carried it, as the sentinels named it), and ``head()`` is read together with ``ROLE`` on one
connection: a head stamped with another address than the server that answered is a session that
went through a failover (``SessionLost``, 503, in every worker and replica alike, until the next
open writes a head on the new master), and a server that answers the head but is no longer a
master drops the connection (``StoreUnavailable``, 503). (The address, not the sentinels'
configuration epoch: a sentinel restarted without its state reports epoch 0 again, and every
sentinel of a set restarted together does so for good.)

Acknowledged writes (``wait_replicas`` > 0, the ``redis_wait_replicas`` option): the open and
each allocate/deallocate event are followed, on the same connection, by ``WAIT wait_replicas
wait_timeout``; fewer replicas than asked within ``wait_timeout`` raise ``StoreUnavailable``
(503: Volcano is never told an event was counted that a failover can lose). With it on, the open
of a cycle is on a replica before Volcano hears of it, so after a failover every replica knows
that the cycle existed and answers 503 for it, instead of a replica that had not read it yet
finding no session and deciding without one.
"""

from __future__ import annotations

import json
import time
from typing import Any, Literal

import redis
import redis.sentinel

from policy_extender.session.store import (DEFAULT_TTL_SECONDS, ENDED_KEPT, Change, Head, OpenSuperseded,
                                           SessionCounts, SessionLost, StoreOptions, StoreUnavailable,
                                           new_session_id, new_tip)
from policy_extender.store_url import parse_sentinel_url

DEFAULT_PREFIX = "policy-extender"
#: seconds to connect to Redis and to wait for each answer (the ``redis_timeout`` option)
DEFAULT_TIMEOUT = 0.25
#: seconds a write waits for its replicas' acknowledgement (``redis_wait_timeout``)
DEFAULT_WAIT_TIMEOUT = 0.1
#: seconds a Sentinel-named address whose server said it is not a master is passed over
REFUSED_SECONDS = 1.0
#: the fields of the head hash, in the order head() reads them
HEAD_FIELDS = ("sid", "seq", "version", "opened_at", "tip", "master")

# Ends the session named by KEYS[2] (live): counted as `how` if its head (KEYS[1]) is still there,
# else as expired (the head's PEXPIRE fired); its keys are deleted, its id kept in `ended`.
# KEYS[3] is the counts hash.
_END_CURRENT = """
local function end_current(prefix, how)
  redis.call('UNLINK', prefix .. 'lost')
  local old = redis.call('GET', KEYS[2])
  if not old then return end
  if redis.call('EXISTS', KEYS[1]) == 0 then how = 'expired' end
  redis.call('HINCRBY', KEYS[3], how, 1)
  redis.call('LPUSH', prefix .. 'ended', old)
  redis.call('LTRIM', prefix .. 'ended', 0, """ + str(ENDED_KEPT - 1) + """)
  redis.call('UNLINK', KEYS[1], KEYS[2], prefix .. 'snapshot:' .. old,
               prefix .. 'alloc:' .. old, prefix .. 'log:' .. old)
end
"""

# Orders an open or close by arrival: `ticket` (a number, or '' for one that arrived now) is
# stored as the last applied unless a greater one was stored first (then returns false).
# KEYS[4] is the arrival hash.
_ARRIVAL = """
local function arrived(key, ticket)
  local issued = tonumber(redis.call('HGET', key, 'issued') or '0')
  local applied = tonumber(redis.call('HGET', key, 'applied') or '0')
  ticket = tonumber(ticket) or (issued + 1)
  if ticket < applied then return false end
  redis.call('HSET', key, 'issued', math.max(issued, ticket), 'applied', ticket)
  return true
end
"""

# KEYS: head, live, counts, arrival, sources:<version>.
# ARGV: prefix, sid, version, opened_at, ttl_ms, snapshot, sources_json, ticket, master.
# Returns 0 (nothing stored) for an open superseded by a later arrival.
_OPEN = _END_CURRENT + _ARRIVAL + """
if not arrived(KEYS[4], ARGV[8]) then return 0 end
end_current(ARGV[1], 'replaced')
redis.call('HSET', KEYS[1], 'sid', ARGV[2], 'seq', 0, 'version', ARGV[3], 'opened_at', ARGV[4], 'tip', '',
           'master', ARGV[9])
redis.call('PEXPIRE', KEYS[1], ARGV[5])
redis.call('SET', ARGV[1] .. 'snapshot:' .. ARGV[2], ARGV[6], 'PX', ARGV[5])
redis.call('SET', KEYS[2], ARGV[2])
if not redis.call('SET', KEYS[5], ARGV[7], 'NX', 'PX', ARGV[5]) then redis.call('PEXPIRE', KEYS[5], ARGV[5]) end
redis.call('HINCRBY', KEYS[3], 'opened', 1)
return 1
"""

# KEYS: head, live, counts, arrival. ARGV: prefix.
_CLOSE = _END_CURRENT + _ARRIVAL + """
arrived(KEYS[4], '')
end_current(ARGV[1], 'closed')
return 1
"""

# One allocate (ARGV[4] = '+') or deallocate ('-') event, counted net (store.py): the task's
# entry in KEYS[2] (alloc) is <last kind><net + 1><record>; a change is appended to KEYS[3] (log),
# entry n-1 being the change that set seq to n, and the head's seq and tip move with it.
# KEYS: head, alloc:<sid>, log:<sid>. ARGV: sid, task uid, record, kind, tip.
_EVENT = """
if redis.call('HGET', KEYS[1], 'sid') ~= ARGV[1] then return 0 end
local current = redis.call('HGET', KEYS[2], ARGV[2])
local last, net = '', 0
if current then
  last = string.sub(current, 1, 1)
  net = tonumber(string.sub(current, 2, 2)) - 1
end
if last == '-' and ARGV[4] == '-' then return 1 end
if last ~= ARGV[4] then
  if ARGV[4] == '+' then net = net + 1 else net = net - 1 end
end
local entry = tostring(net + 1) .. ARGV[3]
redis.call('HSET', KEYS[2], ARGV[2], ARGV[4] .. entry)
redis.call('RPUSH', KEYS[3], ARGV[5] .. '\0' .. ARGV[2] .. '\0' .. entry)
local ttl = redis.call('PTTL', KEYS[1])
redis.call('PEXPIRE', KEYS[2], ttl)
redis.call('PEXPIRE', KEYS[3], ttl)
redis.call('HINCRBY', KEYS[1], 'seq', 1)
redis.call('HSET', KEYS[1], 'tip', ARGV[5])
return 1
"""


# Adds one worker's tally of a cycle (session/tally.py): registers the cycle (unless it is older
# than every one of the `keep` kept, then returns -1), drops cycles beyond `keep`, adds counts,
# sets first notes where absent and latest notes always, under a cap of entries per cycle.
# KEYS: cycles, n:<cid>, s:<cid>, dropped. ARGV: prefix, cid, opened_at, keep, cap, dropped,
# n counts, n firsts, n lasts, then key/value pairs of each in that order.
# Returns the first-note keys that were new.
_TALLY_MERGE = """
local prefix, cid, opened, keep, cap = ARGV[1], ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local dropped = tonumber(ARGV[6])
if not redis.call('ZSCORE', KEYS[1], cid) then
  local kept = redis.call('ZREVRANGE', KEYS[1], 0, keep - 1, 'WITHSCORES')
  if #kept >= 2 * keep and opened < tonumber(kept[#kept]) then return -1 end
  redis.call('ZADD', KEYS[1], opened, cid)
  local old = redis.call('ZREVRANGE', KEYS[1], keep, -1)
  for _, o in ipairs(old) do
    redis.call('UNLINK', prefix .. 'tally:n:' .. o, prefix .. 'tally:s:' .. o)
    redis.call('HDEL', KEYS[4], o)
    redis.call('ZREM', KEYS[1], o)
  end
end
local entries = redis.call('HLEN', KEYS[2]) + redis.call('HLEN', KEYS[3])
local nc, nf, nl = tonumber(ARGV[7]), tonumber(ARGV[8]), tonumber(ARGV[9])
local i = 10
for _ = 1, nc do
  local k, n = ARGV[i], tonumber(ARGV[i + 1])
  if entries < cap or redis.call('HEXISTS', KEYS[2], k) == 1 then
    if redis.call('HINCRBY', KEYS[2], k, n) == n then entries = entries + 1 end
  else dropped = dropped + 1 end
  i = i + 2
end
local new = {}
for _ = 1, nf do
  local k = ARGV[i]
  if entries < cap then
    if redis.call('HSETNX', KEYS[3], k, ARGV[i + 1]) == 1 then
      entries = entries + 1
      new[#new + 1] = k
    end
  elseif redis.call('HEXISTS', KEYS[3], k) == 0 then dropped = dropped + 1 end
  i = i + 2
end
for _ = 1, nl do
  local k = ARGV[i]
  if entries < cap or redis.call('HEXISTS', KEYS[3], k) == 1 then
    if redis.call('HSET', KEYS[3], k, ARGV[i + 1]) == 1 then entries = entries + 1 end
  else dropped = dropped + 1 end
  i = i + 2
end
if dropped > 0 then redis.call('HINCRBY', KEYS[4], cid, dropped) end
return new
"""


class _Unavailable:
    """``with UNAVAILABLE:`` turns redis-py's connection errors and timeouts (a Redis down,
    paused, loading or failing over, no master known to the sentinels) into
    ``StoreUnavailable``. A refused password or ACL stays what it is (redis-py counts it as a
    connection error too): a configuration to fix, not a store that will be back."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind, error, traceback) -> Literal[False]:
        if (kind is not None and issubclass(kind, (redis.ConnectionError, redis.TimeoutError))
                and not issubclass(kind, (redis.AuthenticationError, redis.exceptions.AuthorizationError))):
            raise StoreUnavailable(f"the Redis session store is unavailable: {type(error).__name__}: "
                                   f"{error}") from error
        return False


UNAVAILABLE = _Unavailable()


class RedisStore:
    """The session store in Redis (see the module docstring); a ``session.store.SessionStore``,
    whose docstrings say what each method does."""

    def __init__(self, url: str, ttl_seconds: float = DEFAULT_TTL_SECONDS,
                 prefix: str = DEFAULT_PREFIX, timeout: float = DEFAULT_TIMEOUT,
                 session_timeout: float | None = None, wait_replicas: int = 0,
                 wait_timeout: float = DEFAULT_WAIT_TIMEOUT) -> None:
        self.url, self.ttl_seconds, self.prefix = url, ttl_seconds, prefix
        self.timeout = timeout
        self.session_timeout = max(1.0, 4 * timeout) if session_timeout is None else session_timeout
        self.wait_replicas, self.wait_timeout = wait_replicas, wait_timeout
        self._key = "{" + prefix + "}:"
        waited = wait_timeout if wait_replicas else 0.0  # a write's answer comes after its WAIT
        # redis-py's pools are thread safe and notice a fork (they check the pid) and reconnect.
        self._redis = self._client(timeout)
        self._writes = self._client(timeout + waited) if waited else self._redis
        bulk = self._client(self.session_timeout + waited)
        self._bulk = bulk
        self._open = bulk.register_script(_OPEN)
        self._close = bulk.register_script(_CLOSE)
        self._event = self._writes.register_script(_EVENT)
        self._tally_merge = self._redis.register_script(_TALLY_MERGE)

    @classmethod
    def from_setting(cls, setting: str, options: StoreOptions) -> RedisStore:
        """A ``redis://``, ``rediss://`` or ``unix://`` URL (redis-py's forms), or for
        SentinelStore a ``redis+sentinel://`` address (store_url.py)."""
        return cls(setting, ttl_seconds=options.ttl_seconds,
                   timeout=DEFAULT_TIMEOUT if options.redis_timeout is None else options.redis_timeout,
                   wait_replicas=options.redis_wait_replicas,
                   wait_timeout=(DEFAULT_WAIT_TIMEOUT if options.redis_wait_timeout is None
                                 else options.redis_wait_timeout))

    def _client(self, read_timeout: float) -> Any:  # a redis.Redis; Any: redis-py types replies bytes | str, these are bytes
        """A client (its own pool) whose answers may take ``read_timeout`` seconds."""
        return redis.Redis.from_url(self.url, socket_timeout=read_timeout,
                                    socket_connect_timeout=self.timeout)

    def __reduce__(self):
        return (type(self), (self.url, self.ttl_seconds, self.prefix, self.timeout, self.session_timeout,
                             self.wait_replicas, self.wait_timeout))

    def _keys(self, *names: str) -> list[str]:
        return [self._key + name for name in names]

    # -- which server answered (SentinelStore); a plain Redis is always the same one, "" -------

    def _read_head(self) -> tuple[list, str]:
        """The head hash's HEAD_FIELDS, and the server that answered them (stamped at open)."""
        return self._redis.hmget(self._key + "head", HEAD_FIELDS), ""

    def _write_open(self, keys: list[str], args: list) -> int:
        """Run the open script with ``args`` and, last, the server it is written to (its stamp);
        its result (0: superseded, nothing stored)."""
        if self.wait_replicas:
            return self._acknowledged(self._bulk, _OPEN, keys, [*args, ""], "onSessionOpen")
        return self._open(keys=keys, args=[*args, ""])

    def begin_open(self) -> int:
        with UNAVAILABLE:
            return int(self._writes.hincrby(self._key + "arrival", "issued", 1))

    def open(self, snapshot: bytes, policy_version: str, policy_sources: dict[str, str],
             ticket: int | None = None) -> str:
        session_id = new_session_id()
        with UNAVAILABLE:
            keys = self._keys("head", "live", "counts", "arrival", "sources:" + policy_version)
            stored = self._write_open(keys, [self._key, session_id, policy_version, repr(time.time()),
                                             self._ttl_ms(), snapshot, json.dumps(policy_sources),
                                             "" if ticket is None else str(ticket)])
        if not stored:
            raise OpenSuperseded(f"onSessionOpen arrived before the onSessionOpen or onSessionClose stored "
                                 f"last (arrival {ticket}): not stored, the later cycle's session stays")
        return session_id

    def close(self) -> None:
        with UNAVAILABLE:
            self._close(keys=self._keys("head", "live", "counts", "arrival"), args=[self._key])

    def head(self) -> Head | None:
        with UNAVAILABLE:
            (sid, seq, version, opened_at, tip, master), answered_by = self._read_head()
        if sid is None:
            return None
        head = Head(sid.decode(), int(seq), version.decode(), float(opened_at), (tip or b"").decode())
        opened_on = (master or b"").decode()
        if opened_on != answered_by:
            raise SessionLost(f"session {head.session_id} was opened before a failover of the Redis master "
                              f"(on {opened_on or 'an unknown master'}, now {answered_by}): writes of it may be "
                              "lost; calls fail until the next onSessionOpen")
        return head

    def snapshot(self, session_id: str) -> bytes | None:
        with UNAVAILABLE:
            return self._redis.get(self._key + "snapshot:" + session_id)

    def allocations(self, session_id: str) -> list[tuple[int, bytes]]:
        with UNAVAILABLE:
            entries = self._redis.hvals(self._key + "alloc:" + session_id)
        return [(entry[1] - 49, entry[2:]) for entry in entries if entry[1:2] != b"1"]

    def changes(self, session_id: str, after_seq: int) -> list[Change]:
        with UNAVAILABLE:
            entries = self._redis.lrange(self._key + "log:" + session_id, after_seq, -1)
        return [_change(entry) for entry in entries]

    def ended(self, session_id: str) -> bool:
        with UNAVAILABLE:
            pipe = self._redis.pipeline(transaction=True)
            pipe.lrange(self._key + "ended", 0, -1)
            pipe.get(self._key + "live")
            pipe.exists(self._key + "head")
            ended, live, head = pipe.execute()
        # closed or replaced; or expired (still the last opened, its head gone by its PEXPIRE):
        # a store that restarted empty has no trace of it (lost)
        return session_id.encode() in ended or (live == session_id.encode() and not head)

    def policy_sources(self, version: str) -> dict[str, str] | None:
        with UNAVAILABLE:
            stored = self._redis.get(self._key + "sources:" + version)
        return None if stored is None else json.loads(stored)

    def mark_lost(self, session_id: str, seconds: float) -> None:
        with UNAVAILABLE:
            self._redis.set(self._key + "lost", session_id, px=max(1, int(seconds * 1000)))

    def lost(self) -> str | None:
        with UNAVAILABLE:
            found = self._redis.get(self._key + "lost")
        return None if found is None else found.decode()

    def session_counts(self) -> SessionCounts:
        with UNAVAILABLE:
            stored = self._redis.hgetall(self._key + "counts")
        return SessionCounts(**{name.decode(): int(value) for name, value in stored.items()})

    def allocate(self, session_id: str, task_uid: str, record: bytes) -> bool:
        return self._apply(session_id, task_uid, record, "+")

    def deallocate(self, session_id: str, task_uid: str, record: bytes) -> bool:
        return self._apply(session_id, task_uid, record, "-")

    def _apply(self, session_id: str, task_uid: str, record: bytes, kind: str) -> bool:
        keys = self._keys("head", "alloc:" + session_id, "log:" + session_id)
        args = [session_id, task_uid, record, kind, new_tip()]
        with UNAVAILABLE:
            if self.wait_replicas:
                return bool(self._acknowledged(self._writes, _EVENT, keys, args, "the event"))
            return bool(self._event(keys=keys, args=args))

    def _acknowledged(self, client: redis.Redis, script: str, keys: list, args: list, what: str):
        """``script``'s result, after ``WAIT`` on the same connection saw ``wait_replicas``
        replicas acknowledge it; StoreUnavailable when fewer did within ``wait_timeout``."""
        pipe = client.pipeline(transaction=False)
        pipe.execute_command("EVAL", script, len(keys), *keys, *args)  # Redis runs the Lua script
        pipe.execute_command("WAIT", self.wait_replicas, max(1, int(self.wait_timeout * 1000)))
        result, replicas = pipe.execute()
        self._check_acknowledged(replicas, what)
        return result

    def _check_acknowledged(self, replicas: int, what: str) -> None:
        if replicas < self.wait_replicas:
            raise StoreUnavailable(f"{what} was written to the Redis master but acknowledged by "
                                   f"{replicas} of the {self.wait_replicas} replicas asked for "
                                   f"(redis_wait_replicas) within {self.wait_timeout} s: a failover "
                                   "could lose it")

    # -- the decision tally (session/tally.py) ----------------------------------------------

    def tally_merge(self, cycle_id: str, opened_at: float, counts: dict[str, int],
                    firsts: dict[str, str], lasts: dict[str, str], dropped: int, keep: int,
                    max_entries: int) -> list[str] | None:
        args: list = [self._key, cycle_id, repr(opened_at), keep, max_entries, dropped,
                      len(counts), len(firsts), len(lasts)]
        for mapping in (counts, firsts, lasts):
            for k, v in mapping.items():
                args += (k, v)
        found = self._tally_merge(keys=self._keys("tally:cycles", "tally:n:" + cycle_id,
                                                  "tally:s:" + cycle_id, "tally:dropped"), args=args)
        if found == -1:
            return None
        return [k.decode() for k in found]

    def tally_cycles(self) -> list[tuple[str, float, int]]:
        cycles = self._redis.zrevrange(self._key + "tally:cycles", 0, -1, withscores=True)
        if not cycles:
            return []
        dropped = self._redis.hmget(self._key + "tally:dropped", [c for c, _ in cycles])
        return [(c.decode(), score, int(d or 0)) for (c, score), d in zip(cycles, dropped)]

    def tally_read(self, cycle_id: str, prefix: str) -> tuple[dict[str, int], dict[str, str]]:
        match = "".join("\\" + ch if ch in "*?[]\\" else ch for ch in prefix) + "*"
        counts = {k.decode(): int(v) for k, v in
                  self._redis.hscan_iter(self._key + "tally:n:" + cycle_id, match=match, count=1000)}
        notes = {k.decode(): v.decode() for k, v in
                 self._redis.hscan_iter(self._key + "tally:s:" + cycle_id, match=match, count=1000)}
        return counts, notes

    def _ttl_ms(self) -> int:
        return max(1, int(self.ttl_seconds * 1000))


class SentinelStore(RedisStore):
    """The Redis store behind Sentinel: the master is the one the sentinels name at each new
    connection and that says it is a master (``ROLE``); a session opened before a failover is
    lost (the module docstring). ``redis+sentinel://`` URL, store_url.py."""

    def __init__(self, url: str, ttl_seconds: float = DEFAULT_TTL_SECONDS,
                 prefix: str = DEFAULT_PREFIX, timeout: float = DEFAULT_TIMEOUT,
                 session_timeout: float | None = None, wait_replicas: int = 0,
                 wait_timeout: float = DEFAULT_WAIT_TIMEOUT) -> None:
        self.address = parse_sentinel_url(url)
        self._sentinel = Sentinels(
            list(self.address.sentinels),
            sentinel_kwargs={"socket_timeout": timeout, "socket_connect_timeout": timeout,
                             "password": self.address.sentinel_password})
        super().__init__(url, ttl_seconds, prefix, timeout, session_timeout, wait_replicas, wait_timeout)

    def _client(self, read_timeout: float) -> Any:  # a redis.Redis (see RedisStore._client)
        address = self.address
        return self._sentinel.master_for(address.master, socket_timeout=read_timeout,
                                         socket_connect_timeout=self.timeout, db=address.db,
                                         username=address.username, password=address.password,
                                         connection_class=MasterConnection)

    def _read_head(self) -> tuple[list, str]:
        replies, answered_by = self._on_master(self._redis, [("HMGET", self._key + "head", *HEAD_FIELDS)])
        return replies[0], answered_by

    def _write_open(self, keys: list[str], args: list) -> int:
        def commands(master: str) -> list[tuple]:
            written = [("EVAL", _OPEN, len(keys), *keys, *args, master)]
            if self.wait_replicas:
                written.append(("WAIT", self.wait_replicas, max(1, int(self.wait_timeout * 1000))))
            return written

        replies, _ = self._on_master(self._bulk, commands)
        if self.wait_replicas:
            self._check_acknowledged(replies[1], "onSessionOpen")
        return replies[0]

    def _on_master(self, client: Any, commands) -> tuple[list, str]:
        """The replies to ``commands`` (a list, or a function of the server's address giving
        one), sent in one round trip on one connection after ``ROLE`` and the server's address
        ("host:port", as the sentinels named it). A server that is not a master now drops the
        connection: StoreUnavailable."""
        pool = client.connection_pool
        connection = pool.get_connection()  # connected, and a master when it connected (MasterConnection)
        try:
            answered_by = f"{connection.host}:{connection.port}"
            sent = commands(answered_by) if callable(commands) else commands
            connection.send_packed_command(connection.pack_commands([("ROLE",), *sent]))
            role = connection.read_response()
            replies = []
            errors = []
            for _ in sent:
                try:
                    replies.append(connection.read_response())
                except redis.ResponseError as error:  # the script's or the server's refusal
                    errors.append(error)
            if role[0] != b"master":
                connection.disconnect()
                self._sentinel.refuse((connection.host, connection.port))
                raise StoreUnavailable(f"the Redis server at {answered_by}, named the master by the sentinels, "
                                       f"answers as a {_role_text(role)}: failing over; calls fail until "
                                       "the sentinels name the new master")
            if errors:
                raise errors[0]
            return replies, answered_by
        except BaseException:
            connection.disconnect()  # never hand on a connection with replies left unread
            raise
        finally:
            pool.release(connection)


class Sentinels(redis.sentinel.Sentinel):
    """redis-py's Sentinel client, discovering the master with ``SENTINEL GET-MASTER-ADDR-BY-NAME``
    (the module docstring) and passing over an address whose server said it is not a master."""

    def __init__(self, sentinels: list, **kwargs: Any) -> None:
        super().__init__(sentinels, **kwargs)
        #: (host, port) -> until when (time.monotonic()) discovery passes over it
        self.refused: dict[tuple[str, int], float] = {}

    def refuse(self, address: tuple[str, int]) -> None:
        """The server at ``address`` said it is not a master: pass over it for REFUSED_SECONDS."""
        self.refused[address] = time.monotonic() + REFUSED_SECONDS

    def discover_master(self, service_name: str) -> tuple[str, int]:
        now, errors = time.monotonic(), []
        for number, sentinel in enumerate(list(self.sentinels)):
            try:
                named = sentinel.execute_command("SENTINEL GET-MASTER-ADDR-BY-NAME", service_name)
            except (redis.ConnectionError, redis.TimeoutError) as error:
                errors.append(f"{_sentinel_text(sentinel)}: {error!r}")
                continue
            if not named:
                errors.append(f"{_sentinel_text(sentinel)} knows no master {service_name!r}")
                continue
            host = named[0].decode() if isinstance(named[0], bytes) else str(named[0])
            address = (host, int(named[1]))
            if self.refused.get(address, 0.0) > now:
                errors.append(f"{_sentinel_text(sentinel)} names {host}:{address[1]}, which said it is not a master")
                continue
            if number:  # ask this one first next time, as redis-py does
                self.sentinels[0], self.sentinels[number] = sentinel, self.sentinels[0]
            return address
        raise redis.sentinel.MasterNotFoundError(f"No master found for {service_name!r}: {'; '.join(errors)}")


class MasterConnection(redis.sentinel.SentinelManagedConnection):
    """A connection to the address the sentinels name as the master, refused (ConnectionError,
    so StoreUnavailable) when the server there says it is not a master (``ROLE``)."""

    def on_connect_check_health(self, check_health: bool = True) -> None:
        super().on_connect_check_health(check_health=check_health)
        self.send_command("ROLE")
        role = self.read_response()
        if role[0] != b"master":
            self.connection_pool.sentinel_manager.refuse((self.host, self.port))
            raise redis.ConnectionError(f"the Redis server at {self.host}:{self.port}, named the master by "
                                        f"the sentinels, is a {_role_text(role)}: failing over")


def _role_text(role: list) -> str:
    """``ROLE``'s answer in words: "replica of HOST:PORT", "master", ..."""
    kind = role[0].decode() if isinstance(role[0], bytes) else str(role[0])
    if kind == "slave" and len(role) >= 3:
        host = role[1].decode() if isinstance(role[1], bytes) else role[1]
        return f"replica of {host}:{role[2]}"
    return kind


def _sentinel_text(sentinel: Any) -> str:
    kwargs = sentinel.connection_pool.connection_kwargs
    return f"sentinel {kwargs.get('host')}:{kwargs.get('port')}"


def _change(entry: bytes) -> Change:
    """A log entry ``<tip>\0<uid>\0<net + 1><record>`` as a Change."""
    tip, uid, rest = entry.split(b"\0", 2)
    return Change(uid.decode(), rest[0] - 49, rest[1:], tip.decode())
