"""The decision tally's storage: counts and notes per cycle, merged additively in the session store.

A cycle is a session (onSessionOpen -> onSessionClose). Its calls are spread over every worker and
replica, so the tally lives in the shared session store, merged additively: each worker adds its
own calls to an in-memory aggregate (a dict update under one lock, never a store call), and a
flusher thread per process adds that aggregate to the store every ``flush_seconds``
(``tally_flush_seconds``) and at exit. A verb never waits for the store; when the store fails,
the flush is dropped (logged, counted): tally data is lost, never a decision.

Entries. Every entry is a key ``<kind>\\x1f<object>\\x1f<path>`` (kind ``task``, ``job`` or
``queue``; the object ``NAMESPACE/NAME``, a queue ``NAME``) with a count, added across workers,
or a note (text): an *example* note is kept from the first writer, a *latest* note from the last
one. What the paths mean, what each verb adds and how ``GET /why`` shows them is the deciding
layer's (``decide/tallying.py``, whose ``DecisionTally`` extends :class:`CycleTally`): this module
only stores.

Bounds. A cycle holds at most ``max_entries`` entries (``tally_max_entries``, counts and notes
together) in the store and in each worker's aggregate; entries beyond it are dropped and counted
(``dropped`` in ``/why``). Notes are cut to ``NOTE_CHARS`` characters. The store keeps the open
cycle and the ``keep_closed`` (``tally_cycles``) most recent closed ones, by the time each was
opened; a flush for an older cycle is dropped.
"""

from __future__ import annotations

import atexit
import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from policy_extender import process

log = logging.getLogger("policy_extender.why")

SEP = "\x1f"
#: characters kept of one note (a reason, the top nodes)
NOTE_CHARS = 500
#: seconds between two warnings about failing flushes
WARN_EVERY = 60.0

DEFAULT_KEEP_CLOSED = 3
DEFAULT_MAX_ENTRIES = 20000
DEFAULT_FLUSH_SECONDS = 1.0


def key(kind: str, obj: str, path: str) -> str:
    return kind + SEP + obj + SEP + path


@dataclass
class CycleAggregate:
    """One cycle's calls as seen by one worker since its last flush."""

    opened_at: float
    cap: int
    counts: dict[str, int] = field(default_factory=dict)
    firsts: dict[str, tuple[str, str]] = field(default_factory=dict)  # key -> (note, request id)
    lasts: dict[str, str] = field(default_factory=dict)
    dropped: int = 0

    def size(self) -> int:
        return len(self.counts) + len(self.firsts) + len(self.lasts)

    def add(self, k: str, n: int = 1, drops: int = 1) -> None:
        """Add ``n`` to ``k``'s count; ``drops`` counted when the key does not fit (a fold adds
        ``n`` calls at once: ``n`` drops, as adding them one by one would)."""
        counts = self.counts
        found = counts.get(k)
        if found is not None:
            counts[k] = found + n
        elif self.size() < self.cap:
            counts[k] = n
        else:
            self.dropped += drops

    def add_beyond_cap(self, k: str, n: int = 1) -> None:
        """Add ``n`` to ``k``'s count even past the cap: for the few keys of a bounded set (one per
        verb: ``DecisionTally.note_call``) whose absence would say something false."""
        self.counts[k] = self.counts.get(k, 0) + n

    def first(self, k: str, note: str, request_id: str = "-") -> None:
        if k not in self.firsts:
            if self.size() < self.cap:
                self.firsts[k] = (note[:NOTE_CHARS], request_id)
            else:
                self.dropped += 1

    def last(self, k: str, note: str) -> None:
        if k in self.lasts or self.size() < self.cap:
            self.lasts[k] = note[:NOTE_CHARS * 4]
        else:
            self.dropped += 1


class CycleTally:
    """One process's side of the tally (module docstring): aggregates per cycle, added to under
    ``lock`` (``cycle(head)``), flushed to ``store`` by a thread of its own. Storage only: what
    the entries mean is its subclass's (``decide.tallying.DecisionTally``), which may extend
    :meth:`take` (to fold calls it batched), :meth:`forget_inherited` and :meth:`note_was_new`."""

    def __init__(self, store: Any, keep_closed: int = DEFAULT_KEEP_CLOSED,
                 max_entries: int = DEFAULT_MAX_ENTRIES, flush_seconds: float = DEFAULT_FLUSH_SECONDS,
                 enabled: bool = True, on_failure: Any = None) -> None:
        self.store = store
        self.on_failure = on_failure  # called once per failed flush (the service counts it)
        self.keep_closed = keep_closed
        self.max_entries = max_entries
        self.flush_seconds = flush_seconds
        self.enabled = enabled
        #: held while an aggregate of ``_pending`` is changed (``cycle``)
        self.lock = threading.Lock()
        self._pending: dict[str, CycleAggregate] = {}
        #: the process whose flusher runs (``process.pid``; compared by identity on every call)
        self.flusher_pid: int | None = None
        self._flush_lock = threading.Lock()
        self._start_lock = threading.Lock()
        #: set by :meth:`close`: the flusher leaves at once (it waits on this between flushes)
        self._closed = threading.Event()
        self._flusher: threading.Thread | None = None
        self._warned_at = 0.0
        #: flushes the store refused or failed (their data is lost), since this process started
        self.failed_flushes = 0

    # -- adding (verb handlers; never touches the store) ----------------------------------------

    def cycle(self, head) -> CycleAggregate:
        """This process's aggregate of ``head``'s cycle (call with ``lock`` held; every caller
        has returned already when ``head`` is None or the tally is off)."""
        found = self._pending.get(head.session_id)
        if found is None:
            if len(self._pending) > self.keep_closed:  # a cycle never flushed: bounded anyway
                self._pending.pop(next(iter(self._pending)))
            found = self._pending[head.session_id] = CycleAggregate(head.opened_at, self.max_entries)
        return found

    def started(self) -> None:
        """Start this process's flusher if it has none (the first call, or the first after a fork)."""
        if self.flusher_pid != process.pid:
            self.start_flusher()

    def record_open(self, head) -> None:
        """A new cycle: registered at the next flush even if nothing is decided in it."""
        if head is None or not self.enabled:
            return
        self.started()
        with self.lock:
            self.cycle(head)

    # -- flushing (its own thread; at exit; before /why reads) ----------------------------------

    def take(self) -> dict[str, CycleAggregate]:
        """Every cycle's aggregate added since the last take (emptied)."""
        with self.lock:
            pending, self._pending = self._pending, {}
        return pending

    def flush(self) -> bool:
        """Add this process's aggregate to the store. False when the store failed: that data is
        dropped (never retried: a verb must never wait on it, and memory stays bounded)."""
        with self._flush_lock:
            pending = self.take()
            ok = True
            for cycle_id, agg in pending.items():
                try:
                    new = self.store.tally_merge(
                        cycle_id, agg.opened_at, agg.counts, {k: v[0] for k, v in agg.firsts.items()},
                        agg.lasts, agg.dropped, self.keep_closed + 1, self.max_entries)
                except Exception as exc:  # the store is down or refused: lose the tally, not a decision
                    ok = False
                    self._failed(exc)
                    continue
                for k in new or ():
                    self.note_was_new(cycle_id, k, *agg.firsts[k])
            return ok

    def note_was_new(self, cycle_id: str, k: str, note: str, request_id: str) -> None:
        """The store says ``k``'s first note came from this flush (once per cycle and key across
        every worker and replica): nothing here; the subclass logs some."""

    def _failed(self, exc: Exception) -> None:
        self.failed_flushes += 1
        if self.on_failure is not None:
            try:
                self.on_failure()
            except Exception:
                pass
        now = time.monotonic()
        if now - self._warned_at >= WARN_EVERY:
            self._warned_at = now
            log.warning("decision tally: the session store did not take this worker's tally "
                        "(%s: %s); that part of /why is lost (decisions are not affected). "
                        "Check the session store; warned again in %.0f s at most",
                        type(exc).__name__, exc, WARN_EVERY)

    def start_flusher(self) -> None:
        with self._start_lock:
            if self.flusher_pid == process.pid:
                return
            if self.flusher_pid is None:
                atexit.register(self.flush)
            self.flusher_pid = process.pid
            self.forget_inherited()
            self._closed = threading.Event()  # a set one may be inherited from a closed parent
            self._flusher = threading.Thread(target=self._flush_forever, name="policy-extender-tally", daemon=True)
            self._flusher.start()

    def close(self, timeout: float = 5.0) -> None:
        """Stop this process's flusher and flush what is pending (the service's ``stop``).
        Calls recorded afterwards stay pending until a read (``GET /why``) or exit flushes them."""
        self._closed.set()
        flusher = self._flusher
        if flusher is not None and flusher.is_alive() and self.flusher_pid == process.pid:
            flusher.join(timeout)
        self.flush()

    def forget_inherited(self) -> None:
        """Drop what was added before this process started its flusher (inherited through fork:
        the parent flushes its own)."""
        self._pending = {}

    def _flush_forever(self) -> None:
        pid = process.pid
        closed = self._closed
        while self.flusher_pid == pid and not closed.wait(self.flush_seconds):
            try:
                self.flush()
            except Exception:  # never stop the thread; the next turn goes on
                log.exception("decision tally flush failed")

    # -- reading (GET /why) ---------------------------------------------------------------------

    def read(self, prefix: str) -> list[tuple[str, float, int, dict[str, int], dict[str, str]]]:
        """Every kept cycle's entries whose keys start with ``prefix`` (paths relative to it),
        newest cycle first: (cycle id, opened at, entries dropped, counts, notes). This
        process's aggregate is flushed first."""
        self.flush()
        return [(cycle_id, opened_at, dropped, *self.read_cycle(cycle_id, prefix))
                for cycle_id, opened_at, dropped in self.store.tally_cycles()]

    def read_cycle(self, cycle_id: str, prefix: str) -> tuple[dict[str, int], dict[str, str]]:
        """One cycle's counts and notes whose keys start with ``prefix``, relative to it."""
        counts, notes = self.store.tally_read(cycle_id, prefix)
        return _relative(counts, prefix), _relative(notes, prefix)


def _relative(entries: dict, prefix: str) -> dict:
    return {k[len(prefix):]: v for k, v in entries.items()}
