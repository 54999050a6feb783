"""RedisStore: the session store for several replicas behind one Service.

Every change that touches several keys runs as one Lua script (atomic on the server), so an
allocate can never land in a session that another replica has just replaced. All keys share the
hash tag ``{<prefix>}`` so they live in one slot (the scripts also work on a Redis Cluster).

Keys (``P`` = ``{prefix}:``):
  ``P head``           hash sid, seq, version, opened_at; PEXPIRE ttl      (the one read per request)
  ``P live``           the id of the last session opened and not closed     (to count expiries)
  ``P snapshot:<sid>`` the snapshot bytes; PEXPIRE ttl
  ``P alloc:<sid>``    hash task uid -> allocation record; PEXPIRE to the head's remaining ttl
  ``P log:<sid>``      list of changes, entry n-1 set seq to n: ``+<uid>\0<record>`` or ``-<uid>``
  ``P sources:<ver>``  JSON {file: text} of a policy version, written once (no expiry: small)
  ``P counts``         hash opened / closed / expired / replaced
"""

from __future__ import annotations

import json
import time

import redis

from policy_extender.session.store import DEFAULT_TTL_SECONDS, Change, Head, SessionCounts, new_session_id

DEFAULT_PREFIX = "policy-extender"

# Ends the session named by KEYS[2] (live): counted as `how` if its head (KEYS[1]) is still there,
# else as expired (the head's PEXPIRE fired); its keys are deleted. KEYS[3] is the counts hash.
_END_CURRENT = """
local function end_current(prefix, how)
  local old = redis.call('GET', KEYS[2])
  if not old then return end
  if redis.call('EXISTS', KEYS[1]) == 0 then how = 'expired' end
  redis.call('HINCRBY', KEYS[3], how, 1)
  redis.call('UNLINK', KEYS[1], KEYS[2], prefix .. 'snapshot:' .. old,
               prefix .. 'alloc:' .. old, prefix .. 'log:' .. old)
end
"""

# KEYS: head, live, counts, sources:<version>.
# ARGV: prefix, sid, version, opened_at, ttl_ms, snapshot, sources_json.
_OPEN = _END_CURRENT + """
end_current(ARGV[1], 'replaced')
redis.call('HSET', KEYS[1], 'sid', ARGV[2], 'seq', 0, 'version', ARGV[3], 'opened_at', ARGV[4])
redis.call('PEXPIRE', KEYS[1], ARGV[5])
redis.call('SET', ARGV[1] .. 'snapshot:' .. ARGV[2], ARGV[6], 'PX', ARGV[5])
redis.call('SET', KEYS[2], ARGV[2])
redis.call('SET', KEYS[4], ARGV[7], 'NX')
redis.call('HINCRBY', KEYS[3], 'opened', 1)
return 1
"""

# KEYS: head, live, counts. ARGV: prefix.
_CLOSE = _END_CURRENT + """
end_current(ARGV[1], 'closed')
return 1
"""

# Appends a change to KEYS[3] (log) and bumps seq: entry n-1 of the log is the change to seq n.
_LOG = """
local function log(entry)
  redis.call('RPUSH', KEYS[3], entry)
  local ttl = redis.call('PTTL', KEYS[1])
  redis.call('PEXPIRE', KEYS[2], ttl)
  redis.call('PEXPIRE', KEYS[3], ttl)
  redis.call('HINCRBY', KEYS[1], 'seq', 1)
end
"""

# KEYS: head, alloc:<sid>, log:<sid>. ARGV: sid, task uid, record.
_ALLOCATE = _LOG + """
if redis.call('HGET', KEYS[1], 'sid') ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[2], ARGV[2], ARGV[3])
log('+' .. ARGV[2] .. '\\0' .. ARGV[3])
return 1
"""

# KEYS: head, alloc:<sid>, log:<sid>. ARGV: sid, task uid.
_DEALLOCATE = _LOG + """
if redis.call('HGET', KEYS[1], 'sid') ~= ARGV[1] then return 0 end
if redis.call('HDEL', KEYS[2], ARGV[2]) == 1 then log('-' .. ARGV[2]) end
return 1
"""


class RedisStore:
    """The session store in Redis (see the module docstring)."""

    def __init__(self, url: str, ttl_seconds: float = DEFAULT_TTL_SECONDS,
                 prefix: str = DEFAULT_PREFIX) -> None:
        self.url, self.ttl_seconds, self.prefix = url, ttl_seconds, prefix
        self._key = "{" + prefix + "}:"
        # redis-py's pool is thread safe and notices a fork (it checks the pid) and reconnects.
        self._redis = redis.Redis.from_url(url)
        self._open = self._redis.register_script(_OPEN)
        self._close = self._redis.register_script(_CLOSE)
        self._allocate = self._redis.register_script(_ALLOCATE)
        self._deallocate = self._redis.register_script(_DEALLOCATE)

    def __reduce__(self):
        return (RedisStore, (self.url, self.ttl_seconds, self.prefix))

    def _keys(self, *names: str) -> list[str]:
        return [self._key + name for name in names]

    def open(self, snapshot: bytes, policy_version: str, policy_sources: dict[str, str]) -> str:
        session_id = new_session_id()
        self._open(keys=self._keys("head", "live", "counts", "sources:" + policy_version),
                   args=[self._key, session_id, policy_version, repr(time.time()),
                         self._ttl_ms(), snapshot, json.dumps(policy_sources)])
        return session_id

    def close(self) -> None:
        self._close(keys=self._keys("head", "live", "counts"), args=[self._key])

    def head(self) -> Head | None:
        sid, seq, version, opened_at = self._redis.hmget(
            self._key + "head", ("sid", "seq", "version", "opened_at"))
        if sid is None:
            return None
        return Head(sid.decode(), int(seq), version.decode(), float(opened_at))

    def snapshot(self, session_id: str) -> bytes | None:
        return self._redis.get(self._key + "snapshot:" + session_id)

    def allocations(self, session_id: str) -> list[bytes]:
        return self._redis.hvals(self._key + "alloc:" + session_id)

    def changes(self, session_id: str, after_seq: int) -> list[Change]:
        entries = self._redis.lrange(self._key + "log:" + session_id, after_seq, -1)
        return [_change(entry) for entry in entries]

    def policy_sources(self, version: str) -> dict[str, str] | None:
        stored = self._redis.get(self._key + "sources:" + version)
        return None if stored is None else json.loads(stored)

    def session_counts(self) -> SessionCounts:
        stored = self._redis.hgetall(self._key + "counts")
        return SessionCounts(**{name.decode(): int(value) for name, value in stored.items()})

    def allocate(self, session_id: str, task_uid: str, record: bytes) -> bool:
        return bool(self._allocate(keys=self._keys("head", "alloc:" + session_id, "log:" + session_id),
                                   args=[session_id, task_uid, record]))

    def deallocate(self, session_id: str, task_uid: str) -> bool:
        return bool(self._deallocate(keys=self._keys("head", "alloc:" + session_id, "log:" + session_id),
                                     args=[session_id, task_uid]))

    def _ttl_ms(self) -> int:
        return max(1, int(self.ttl_seconds * 1000))


def _change(entry: bytes) -> Change:
    """A log entry ``+<uid>\\0<record>`` (allocate) or ``-<uid>`` (deallocate) as a Change."""
    if entry[:1] == b"-":
        return entry[1:].decode(), None
    uid, record = entry[1:].split(b"\0", 1)
    return uid.decode(), record
