"""SessionCache: one per worker process; turns the shared store into an ``Env`` per request.

Every call reads the store's ``head()`` once (on the SQLite store through ``head_watch``, which
answers from memory until the database file records a commit or the session expires). The
snapshot is fetched and decoded again only when the session id changed. When ``seq`` moved, only
the events after the ones already applied are fetched (``store.changes``) and applied to the
counters, so a cycle with thousands of allocations costs each worker O(new events) per request,
not O(all allocations); the lists of this cycle's allocations and evictions
(``session.allocations``) change the same way, bucket by bucket (``counts.Counters.moved``).
Otherwise the answer comes from memory. Safe for the threads of a gthread worker: the fast path
only reads one attribute, and catching up happens under a lock, once, for every thread that
needs it.

What the cache holds must be what the store holds, or the call fails (``SessionLost``, a 5xx, so
Volcano's ``extender.ignorable`` decides) rather than deciding from a picture no other worker has:
- Catching up is all or nothing: the events are applied to copies, and published only when the
  store returned every event up to the head that was read and the first of them continues the
  history the cache applied (each change carries a ``tip`` id; the head carries the last one).
- A head whose ``seq`` and ``tip`` disagree with the cache's history (a store that lost
  acknowledged writes in a failover, then took new ones), or that stays behind the cache when
  read again, makes the cache rebuild the session from the store, and says so.
- A session that disappears from the store without having ended (no close, no replacement, not
  expired: the store restarted empty, its file was replaced) raises ``SessionLost`` on every call
  until a new session opens. The worker that finds it tells the other workers of its instance
  (``lost_marker``, session/lost.py) and every worker and replica sharing the store
  (``SessionStore.mark_lost``, removed by the next open or close): those that had not read the
  session answer 503 too instead of deciding without it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from policy_extender.session.allocation import Allocation, decode_allocation
from policy_extender.session.counts import Counters, Move
from policy_extender.session.env import JobsAndQueues, SessionEnv, queue_name_of
from policy_extender.session.head_watch import HeadAnswer, watch_for
from policy_extender.session.lost import LostMarker
from policy_extender.session.store import Change, Head, SessionLost, SessionStore
from policy_extender.wire.session_views import NO_SESSION
from policy_extender.wire.snapshot import load_snapshot

log = logging.getLogger("policy_extender.session")

#: :meth:`SessionCache.last_head` before this thread's call read the head
NOT_READ = object()


@dataclass
class CacheCounts:
    """How often the cache went back to the store beyond ``head()`` (for tests and metrics)."""

    snapshot_loads: int = 0
    change_loads: int = 0
    records_decoded: int = 0
    #: sessions rebuilt because the store's history differed from the cache's
    resyncs: int = 0
    #: sessions that vanished from the store without ending
    lost: int = 0


@dataclass(frozen=True)
class _Cached:
    env: SessionEnv  # env.head.seq: how many of the session's events are applied
    #: task uid -> (net change, allocation); touched only under the lock, after a catch-up succeeded
    records: dict[str, tuple[int, Allocation]]
    #: tips[n]: the tip of the change that set seq to n (tips[0] is "", the open); append-only
    tips: list[str] = field(default_factory=lambda: [""])
    #: time.monotonic() when this worker read the session's snapshot (it opened before that)
    loaded_at: float = 0.0


class _Quick(NamedTuple):
    """The env this cache gave for the head watch's answer: given again while the answer holds."""

    answer: HeadAnswer
    env: Any


class SessionCache:
    """The current session of ``store`` as an ``Env`` (see the module docstring)."""

    def __init__(self, store: SessionStore,
                 decode_snapshot: Callable[[bytes], JobsAndQueues] | None = None,
                 decode_allocation: Callable[[bytes], Allocation] = decode_allocation,
                 *, no_session: Any = NO_SESSION,
                 on_event: Callable[[str], None] | None = None,
                 lost_marker: LostMarker | None = None) -> None:
        """``decode_snapshot`` defaults to ``wire.snapshot.load_snapshot``, ``decode_allocation``
        to the ``AllocationRecord`` codec the allocate handler writes with. ``on_event`` is told
        ``"lost"`` or ``"resynced"`` (metrics). ``lost_marker``: the instance's marker of a lost
        session, shared with its other workers (None: this process's own knowledge only)."""
        self.store = store
        self._decode_snapshot = decode_snapshot or _wire_snapshot_decoder()
        self._decode_allocation = decode_allocation
        self._no_session = no_session
        self._on_event = on_event or (lambda event: None)
        self._lost_marker = lost_marker
        #: the lost session this worker last marked, or logged about from another worker's marker
        self._told_lost: str | None = None
        self._lock = threading.Lock()
        self._cached: _Cached | None = None
        self._last = threading.local()
        #: whether env() keeps the head it read for :meth:`last_head` (a thread-local write, 0.8k
        #: instructions a call): from the first :meth:`forget_last_head` on, i.e. when recording
        self._remember_heads = False
        self._watch = watch_for(store)
        #: what :meth:`env` gives while the watch's answer holds, or None
        self._quick: _Quick | None = None
        self.counts = CacheCounts()

    def env(self) -> Any:
        """The env of the current session, or the no-session env. ``env.head`` names the session
        and its pinned policy version. Raises SessionLost (see the module docstring).

        While the head watch's answer holds (``HeadWatch.holds``), the head is the same object,
        and so is the env this cache gave for it (``_quick``)."""
        quick = self._quick
        if quick is not None and self._watch.holds(quick.answer):
            return quick.env
        watch = self._watch
        if watch is None:
            return self._env_for(self.store.head())
        head = watch.head()
        env = self._env_for(head)
        answer = watch.last_answer()
        if not self._remember_heads and answer is not None and answer.head is head and self._gives_again(head, env):
            self._quick = _Quick(answer, env)
        return env

    def _gives_again(self, head: Head | None, env: Any) -> bool:
        """``env`` is what this cache gives for ``head`` on every call while it holds: the cached
        session's env exactly, or the no-session env with no session held (with one held,
        :meth:`_no_session_now` decides on each call whether it ended or was lost)."""
        cached = self._cached
        if head is None:
            return env is self._no_session and cached is None
        return cached is not None and cached.env is env and _is_fresh(cached, head)

    def _env_for(self, head: Head | None) -> Any:
        if self._remember_heads:
            self._last.head = head
        cached = self._cached
        if head is None:
            if cached is None:
                if (lost := self._marked_lost()) is not None:
                    raise self._lost_elsewhere(lost)
                return self._no_session
            with self._lock:
                return self._no_session_now()
        if cached is not None and _is_fresh(cached, head):
            return cached.env
        with self._lock:
            return self._refresh(head)

    def forget_last_head(self) -> None:
        """Start a call: :meth:`last_head` says NOT_READ until this thread's next :meth:`env`
        (which, from now on, keeps the head it reads for :meth:`last_head`)."""
        self._remember_heads = True
        self._quick = None  # every call reads the head through the watch from now on, which keeps it
        self._last.head = NOT_READ

    def last_head(self) -> Head | None | object:
        """The head this thread's last :meth:`env` read (None: no session), or NOT_READ.
        Lets the recorder name a call's session without a second ``head()`` read."""
        return getattr(self._last, "head", NOT_READ)

    # -- no session ---------------------------------------------------------------------------

    def _no_session_now(self) -> Any:
        """The store has no session, and this worker had one: ended, or lost?"""
        cached = self._cached
        if cached is None:
            return self._no_session
        mine = cached.env.head
        # expired or ended as the store tells it (its own clock: a wall-clock step is no expiry),
        # or surely expired: session_ttl after this worker read it (a worker idle for more cycles
        # than the store remembers ended ids must not take an old session for a lost one)
        if self.store.ended(mine.session_id) or time.monotonic() >= cached.loaded_at + self.store.ttl_seconds:
            self._cached = None  # closed, replaced or expired: nothing to report
            return self._no_session
        again = self.store.head()
        if again is not None:  # opened again since this call read the head
            return self._load(again)
        self.counts.lost += 1
        self._on_event("lost")
        if self._told_lost != mine.session_id:
            self._told_lost = mine.session_id  # written once: every other worker and replica answers 503 too
            self._mark_lost(mine.session_id, cached.loaded_at)
        log.error("session %s vanished from the session store without being closed (the store "
                  "restarted empty, or its file was replaced): answering errors until the next "
                  "onSessionOpen, so that extender.ignorable decides", mine.session_id)
        raise SessionLost(f"session {mine.session_id} vanished from the session store without being "
                          "closed (the store restarted empty or its file was replaced); calls fail "
                          "until the next onSessionOpen")

    def _mark_lost(self, session_id: str, loaded_at: float) -> None:
        """Tell the instance's other workers (the marker file) and every worker and replica
        sharing the store (``mark_lost``) that ``session_id`` was lost, for the rest of its TTL
        (it opened before this worker read it at ``loaded_at``)."""
        seconds = loaded_at + self.store.ttl_seconds - time.monotonic()
        if self._lost_marker is not None:
            self._lost_marker.mark(session_id, time.time() + seconds)
        try:
            self.store.mark_lost(session_id, seconds)
        except Exception as error:  # unreachable now: the workers that had the session still answer 503
            log.warning("could not record in the session store that session %s was lost (%s): workers "
                        "and replicas that never read it may decide without it", session_id, error)

    def _marked_lost(self) -> str | None:
        """The session another worker (this instance's marker) or replica (the store's) found
        lost, while that holds; None with no session lost this cycle."""
        if self._lost_marker is not None and (lost := self._lost_marker.lost()) is not None:
            return lost
        return self.store.lost()

    def _lost_elsewhere(self, session_id: str) -> SessionLost:
        """Another worker of this instance found ``session_id`` lost (the marker)."""
        if self._told_lost != session_id:
            self._told_lost = session_id
            log.warning("session %s was lost by the session store (another worker or replica found it "
                        "gone): answering errors until the next onSessionOpen", session_id)
        return SessionLost(f"session {session_id} vanished from the session store without being closed "
                           "(found by another worker or replica); calls fail until the next "
                           "onSessionOpen")

    def session_opened(self) -> None:
        """This instance answered an onSessionOpen: a session lost before is not the cycle's now."""
        if self._lost_marker is not None:
            self._lost_marker.clear()

    # -- catching up --------------------------------------------------------------------------

    def _refresh(self, head: Head) -> Any:
        cached = self._cached
        if cached is not None and _is_fresh(cached, head):
            return cached.env  # another thread caught up while this one waited
        if cached is None or cached.env.head.session_id != head.session_id:
            return self._load(head)
        if head.seq >= cached.env.head.seq and (updated := self._catch_up(cached, head)) is not None:
            return self._publish(updated)
        # an older head than the cache's, or a session that changed between head() and changes()
        now = self.store.head()
        if now is None:
            return self._no_session_now()
        if now.session_id != head.session_id:
            return self._load(now)
        if now.seq >= cached.env.head.seq and (updated := self._catch_up(cached, now)) is not None:
            return self._publish(updated)
        self._resynced(cached.env.head, now)  # the store's history is not the one applied here
        return self._load(now)

    def _publish(self, cached: _Cached) -> Any:
        self._cached = cached
        return cached.env

    def _load(self, head: Head | None) -> Any:
        """The session from scratch: its snapshot, then every event."""
        for _ in range(3):  # a session replaced between two reads: read the new one
            if head is None:
                self._cached = None
                return self._no_session
            if self._lost_marker is not None and (lost := self._lost_marker.lost()) is not None:
                if lost == head.session_id:
                    raise self._lost_elsewhere(lost)
                self._lost_marker.clear()  # another session is the cycle now
            if self.store.lost() == head.session_id:  # the store's record goes with the next open
                raise self._lost_elsewhere(head.session_id)
            started = self._start(head)
            updated = self._catch_up(started, head) if started is not None else None
            if updated is not None:
                return self._publish(updated)
            head = self.store.head()
        raise SessionLost("the session store changed under every attempt to read the session; "
                          "try again")

    def _start(self, head: Head) -> _Cached | None:
        """A new session: its snapshot, and no events applied yet."""
        data = self.store.snapshot(head.session_id)
        if data is None:
            return None
        self.counts.snapshot_loads += 1
        env = SessionEnv(head._replace(seq=0, tip=""), self._decode_snapshot(data), Counters())
        return _Cached(env, {}, loaded_at=time.monotonic())

    def _catch_up(self, cached: _Cached, head: Head) -> _Cached | None:
        """``cached`` with the store's events up to at least ``head``, or None when the store did
        not return a history that continues the cached one up to ``head``. Nothing is changed
        before the whole batch is known to apply."""
        env, records, tips = cached.env, cached.records, cached.tips
        applied = env.head.seq
        self.counts.change_loads += 1
        changes = self.store.changes(env.head.session_id, max(0, applied - 1))
        if applied > 0:
            if not changes or changes[0].tip != tips[applied]:
                return None  # the store's history differs from what this cache applied
            changes = changes[1:]
        if applied + len(changes) < head.seq or (
                applied + len(changes) == head.seq and (changes[-1].tip if changes else tips[applied]) != head.tip):
            return None  # the session ended or changed between head() and changes()
        overlay: dict[str, tuple[int, Allocation]] = {}
        moves: list[Move] = []
        for seq, change in enumerate(changes, applied + 1):
            before = overlay.get(change.task_uid) or records.get(change.task_uid)
            after = (change.net, self._decode(change))
            moves.append(Move(change.task_uid, before, after, seq))
            overlay[change.task_uid] = after
        # counts and the lists of allocations and evictions, new objects for what moved only
        counters = env.counters.moved(moves, lambda job: queue_name_of(env.snapshot, job))
        # every step that could fail is done: publish
        records.update(overlay)
        tips.extend(change.tip for change in changes)
        new_head = head._replace(seq=applied + len(changes), tip=tips[-1])
        return _Cached(SessionEnv(new_head, env.snapshot, counters), records, tips, cached.loaded_at)

    def _decode(self, change: Change) -> Allocation:
        self.counts.records_decoded += 1
        return self._decode_allocation(change.record)

    def _resynced(self, mine: Head, store: Head | None) -> None:
        self.counts.resyncs += 1
        self._on_event("resynced")
        log.warning("session %s: the store's history (seq %s) differs from this worker's (seq %s); "
                    "reading the session again from the store", mine.session_id,
                    None if store is None else store.seq, mine.seq)


def _is_fresh(cached: _Cached, head: Head) -> bool:
    """The cached env is exactly ``head``: same session, same number of events, same last tip."""
    mine = cached.env.head
    return mine.seq == head.seq and mine.tip == head.tip and mine.session_id == head.session_id


def _wire_snapshot_decoder() -> Callable[[bytes], JobsAndQueues]:
    return load_snapshot
