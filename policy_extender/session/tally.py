"""The per-cycle decision tally behind ``GET /why``: what each task, job and queue was answered.

A cycle is a session (onSessionOpen -> onSessionClose). Its calls are spread over every worker and
replica, so the tally lives in the shared session store, merged additively: each worker adds its
own calls to an in-memory aggregate (a dict update under one lock, never a store call; a
predicate call, the most frequent by far, is only appended to a list, and folded into the
aggregate in batches), and a flusher thread per process adds that aggregate to the store every
``flush_seconds`` (``tally_flush_seconds``) and at exit. A verb never waits for the store; when
the store fails, the flush is dropped (logged, counted): tally data is lost, never a decision.
Calls answered without a session are not tallied.

Entries. Every entry is a key ``<kind>\\x1f<object>\\x1f<path>`` (kind ``task``, ``job`` or
``queue``; the object ``NAMESPACE/NAME``, a queue ``NAME``) with a count, added across workers,
or a note (text): an *example* note is kept from the first writer (a rule's first reason in the
cycle), a *latest* note from the last one (the top nodes of the latest prioritize call).

==========================  ==========================================================
path                        meaning
==========================  ==========================================================
``p``                       task: predicate answers (one per node checked)
``p␟fit``                   task: of them, the node fits
``p␟rej␟<rule>``            task: rejected by ``rule`` (example note: its reason)
``s`` / ``s␟top``           task: prioritize calls / latest note: the top nodes, with each
                            rule's contribution (JSON)
``v␟<verb>[␟victims]``      task as evictor: preemptable/reclaimable calls [victims permitted]
``e␟<verb>␟evict|protect|abstain``  task as evictee: answered as a victim / protected / refused
                             by a rule in an Abstain answer (example note)
``q␟<outcome>[␟<rule>]``    job: jobEnqueueable permit/reject/abstain [by rule] (note)
``r␟<ready|not_ready>...``  job: jobReady answers [by rule] (note)
``o␟<overused|...>...``     queue: queueOverused answers [by rule] (note)
``a␟<rule>␟<outcome>``      any: an audited rule's would-be outcome (note: its reason)
==========================  ==========================================================

(``␟`` is the separator ``\\x1f``.) The first reason of an enqueue, overused or ready rule for
one object in one cycle is logged at INFO by the flush that stored it, with the request id of the
call that decided it: once per (cycle, object, rule) across every worker and replica, since the
store says which example notes were new.

Bounds. A cycle holds at most ``max_entries`` entries (``tally_max_entries``, counts and notes
together) in the store and in each worker's aggregate; entries beyond it are dropped and counted
(``dropped`` in ``/why``). Notes are cut to ``NOTE_CHARS`` characters. The store keeps the open
cycle and the ``keep_closed`` (``tally_cycles``) most recent closed ones, by the time each was
opened; a flush for an older cycle is dropped.
"""

from __future__ import annotations

import atexit
import json
import logging
import operator
import re
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from itertools import compress
from typing import Any

from policy_extender import process
from policy_extender.logs import current
from policy_extender.decide.names import PREDICATE, PRIORITIZE
from policy_extender.metrics import take_all

log = logging.getLogger("policy_extender.why")

SEP = "\x1f"
#: characters kept of one note (a reason, the top nodes)
NOTE_CHARS = 500
#: nodes kept of the latest prioritize call
TOP_NODES = 5
#: seconds between two warnings about failing flushes
WARN_EVERY = 60.0
#: paths whose first example note is logged at INFO (enqueue, ready, overused reasons)
LOGGED_PATHS = ("q" + SEP, "r" + SEP, "o" + SEP)

DEFAULT_KEEP_CLOSED = 3
DEFAULT_MAX_ENTRIES = 20000
DEFAULT_FLUSH_SECONDS = 1.0


_FIT = SEP + "fit"
_REJ = SEP + "rej" + SEP
_SESSION_ID = operator.attrgetter("session_id")
_RULE = operator.attrgetter("rule")
#: a TaskView's UID, straight from its decoded Struct (in C)
_TASK_UID = operator.attrgetter("raw.UID")
#: task names remembered by UID (about 150 bytes each)
NAMES_KEPT = 65536
#: values per predicate call in the flat lists of calls waiting for a fold: a fit is (head, name),
#: a rejection (head, name, decision, request id)
FIT_FIELDS, REJECTION_FIELDS = 2, 4


#: predicate calls kept unfolded at most (the flusher folds them every ``flush_seconds``)
FOLD_AT = 20000


def key(kind: str, obj: str, path: str) -> str:
    return kind + SEP + obj + SEP + path


def object_name(view) -> str:
    """``NAMESPACE/NAME`` of a task or job view (``NAME`` alone without a namespace)."""
    namespace, name = getattr(view, "namespace", None), getattr(view, "name", None)
    name = name or getattr(view, "uid", None) or "?"
    return f"{namespace}/{name}" if namespace else str(name)


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


class Tally:
    """One process's side of the tally (module docstring): ``record_*`` from the verb handlers,
    ``flush`` from its thread, ``why`` for ``GET /why``."""

    def __init__(self, store: Any, keep_closed: int = DEFAULT_KEEP_CLOSED,
                 max_entries: int = DEFAULT_MAX_ENTRIES, flush_seconds: float = DEFAULT_FLUSH_SECONDS,
                 enabled: bool = True, on_failure: Any = None) -> None:
        self.store = store
        self.on_failure = on_failure  # called once per failed flush (the service counts it)
        self.keep_closed = keep_closed
        self.max_entries = max_entries
        self.flush_seconds = flush_seconds
        self.enabled = enabled
        self._lock = threading.Lock()
        self._pending: dict[str, CycleAggregate] = {}
        #: predicate calls not yet folded into ``_pending``, flat: FIT_FIELDS / REJECTION_FIELDS
        #: values per call (strings, and the head and decision that exist anyway: nothing new
        #: for the garbage collector to track)
        self._fitted: list = []
        self._rejected: list = []
        self._names: dict[str, str] = {}  # task UID -> object_name
        self._fold_lock = threading.Lock()
        self._flusher_pid: int | None = None
        self._flush_lock = threading.Lock()
        self._start_lock = threading.Lock()
        self._warned_at = 0.0
        #: flushes the store refused or failed (their data is lost), since this process started
        self.failed_flushes = 0

    # -- recording (verb handlers; never touches the store) -------------------------------------

    def cycle(self, head) -> CycleAggregate:
        """This process's aggregate of ``head``'s cycle (call with the lock held; every caller
        has returned already when ``head`` is None or the tally is off)."""
        found = self._pending.get(head.session_id)
        if found is None:
            if len(self._pending) > self.keep_closed:  # a cycle never flushed: bounded anyway
                self._pending.pop(next(iter(self._pending)))
            found = self._pending[head.session_id] = CycleAggregate(head.opened_at, self.max_entries)
        return found

    def _started(self) -> None:
        if self._flusher_pid != process.pid:
            self._start_flusher()

    def record_open(self, head) -> None:
        """A new cycle: registered at the next flush even if nothing is decided in it."""
        if head is None or not self.enabled:
            return
        self._started()
        with self._lock:
            self.cycle(head)

    def record_predicate(self, head, task, decision, audits=(), request_id: str | None = None) -> None:
        """The hot path (one call per node per task): the task's name (from a cache by UID) and
        the call's values added to a flat list with one ``extend``, no lock (``list.extend`` with
        a tuple is atomic), nothing the garbage collector tracks. The flusher folds them into the
        cycle's aggregate (``_fold_predicates``), as does a read of ``/why``; past ``FOLD_AT``
        waiting calls, the calling thread does. ``request_id`` None: this thread's
        (``logs.current``), read only for a rejection or audits, which keep it."""
        if head is None or not self.enabled:
            return
        if self._flusher_pid is not process.pid:  # another int object only after a fork
            self._start_flusher()
        try:
            uid = _TASK_UID(task)  # a TaskView's UID, read in C
        except AttributeError:  # not a TaskView (tests, tools)
            uid = ""
        name = self._names.get(uid)
        if name is None:
            name = object_name(task)
            if uid:
                _keep_name(self._names, uid, name)
        if decision.fits:
            fitted = self._fitted
            fitted.extend((head, name))
            if len(fitted) >= FOLD_AT * FIT_FIELDS:
                self._fold_predicates()
        else:
            rejected = self._rejected
            if request_id is None:
                request_id = current.request_id
            rejected.extend((head, name, decision, request_id))
            if len(rejected) >= FOLD_AT * REJECTION_FIELDS:
                self._fold_predicates()
        if audits:
            if request_id is None:
                request_id = current.request_id
            with self._lock:
                _audits(self.cycle(head), f"task{SEP}{name}{SEP}", audits, request_id)

    def waiting(self) -> int:
        """How many predicate calls wait for the next fold."""
        return len(self._fitted) // FIT_FIELDS + len(self._rejected) // REJECTION_FIELDS

    def _fold_predicates(self) -> None:
        """Add the predicate calls recorded since the last fold to their cycles' aggregates: the
        same counts, first reasons (with their request ids) and drops as adding them one by one
        (which entries a full aggregate drops may differ), with the passes over the calls in C
        (a slice per field, ``map``, ``zip``, ``Counter``) and Python code once per task and outcome."""
        with self._fold_lock:
            fitted, rejected = take_all(self._fitted), take_all(self._rejected)
        if fitted:
            for head, (names,) in _per_session(fitted[0::FIT_FIELDS], fitted[1::FIT_FIELDS]):
                with self._lock:
                    c = self.cycle(head)
                    for name, count in Counter(names).items():
                        k = f"task{SEP}{name}{SEP}p"
                        c.add(k, count, count)
                        c.add(k + _FIT, count, count)
        if rejected:
            step = REJECTION_FIELDS
            for head, (names, decisions, request_ids) in _per_session(
                    rejected[0::step], rejected[1::step], rejected[2::step], rejected[3::step]):
                rules = list(map(_RULE, decisions))
                examples = None
                with self._lock:
                    c = self.cycle(head)
                    # Counter(zip(...)) keeps a tuple per distinct answer only: zip reuses the rest
                    for answer, count in Counter(zip(names, rules)).items():
                        name, rule = answer
                        k = f"task{SEP}{name}{SEP}p"
                        c.add(k, count, count)
                        k += _REJ + (rule or "")
                        c.add(k, count, count)
                        if k in c.firsts:
                            continue
                        if examples is None:  # each answer's first call (dict keeps the last of reversed)
                            last = len(names) - 1
                            examples = dict(zip(zip(reversed(names), reversed(rules)), range(last, -1, -1)))
                        first = examples[answer]
                        c.first(k, decisions[first].reason, request_ids[first])
                        if k not in c.firsts:  # over the cap: each call would have counted a drop
                            c.dropped += count - 1

    def record_prioritize(self, head, task, decision, audits=(), request_id: str = "-") -> None:
        if head is None or not self.enabled:
            return
        self._started()
        prefix = "task" + SEP + object_name(task) + SEP
        top = sorted(decision.scores.items(), key=lambda item: (-item[1], item[0]))[:TOP_NODES]
        shown = [{"node": name, "score": score,
                  "rules": {rule: per[name] for rule, per in decision.per_rule.items() if name in per}}
                 for name, score in top]
        note = json.dumps(shown, separators=(",", ":"))
        with self._lock:
            c = self.cycle(head)
            c.add(prefix + "s")
            if top:  # preempt's prioritize of no nodes (Volcano v1.14+) keeps the latest scores shown
                c.last(prefix + "s" + SEP + "top", note)
            if audits:
                _audits(c, prefix, audits, request_id)

    def record_victims(self, head, verb: str, evictor, evictees, decision, audits=(),
                       request_id: str = "-") -> None:
        if head is None or not self.enabled:
            return
        self._started()
        prefix = "task" + SEP + object_name(evictor) + SEP
        victims = set(decision.victims)
        # refused by a rule: protected when the answer permits; when it abstains (`if none
        # abstain`), the tier's other plugins decide and may evict the pod all the same
        refused = "protect" if decision.status else "abstain"
        with self._lock:
            c = self.cycle(head)
            c.add(prefix + "v" + SEP + verb)
            if victims:
                c.add(prefix + "v" + SEP + verb + SEP + "victims", len(victims))
            for i, evictee in enumerate(evictees):
                other = "task" + SEP + object_name(evictee) + SEP + "e" + SEP + verb + SEP
                if i in victims:
                    c.add(other + "evict")
                elif i in decision.reasons:
                    c.add(other + refused)
                    c.first(other + refused, decision.reasons[i], request_id)
            if audits:
                _audits(c, prefix, audits, request_id)

    def record_enqueue(self, head, job, decision, outcome: str, audits=(), request_id: str = "-") -> None:
        self._job_or_queue(head, "job", object_name(job), "q", outcome, decision.rule, decision.reason,
                           audits, request_id)

    def record_ready(self, head, job, decision, audits=(), request_id: str = "-") -> None:
        outcome = "ready" if decision.value else "not_ready"
        self._job_or_queue(head, "job", object_name(job), "r", outcome, decision.rule, decision.reason,
                           audits, request_id)

    def record_overused(self, head, queue, decision, audits=(), request_id: str = "-") -> None:
        outcome = "overused" if decision.value else "not_overused"
        self._job_or_queue(head, "queue", queue.name or "?", "o", outcome, decision.rule, decision.reason,
                           audits, request_id)

    def _job_or_queue(self, head, kind, obj, verb, outcome, rule, reason, audits, request_id) -> None:
        if head is None or not self.enabled:
            return
        self._started()
        prefix = kind + SEP + obj + SEP
        with self._lock:
            c = self.cycle(head)
            c.add(prefix + verb + SEP + outcome)
            if rule:
                k = prefix + verb + SEP + outcome + SEP + rule
                c.add(k)
                if reason:
                    c.first(k, reason, request_id)
            if audits:
                _audits(c, prefix, audits, request_id)

    # -- flushing (its own thread; at exit; before /why reads) ----------------------------------

    def take(self) -> dict[str, CycleAggregate]:
        self._fold_predicates()
        with self._lock:
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
                    if k.startswith(_LOGGED_KINDS):
                        _log_reason(cycle_id, k, *agg.firsts[k])
            return ok

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

    def _start_flusher(self) -> None:
        with self._start_lock:
            if self._flusher_pid == process.pid:
                return
            if self._flusher_pid is None:
                atexit.register(self.flush)
            self._flusher_pid = process.pid
            self._pending = {}  # inherited through fork: the parent flushes its own
            self._fitted, self._rejected = [], []
            threading.Thread(target=self._flush_forever, name="policy-extender-tally", daemon=True).start()

    def _flush_forever(self) -> None:
        pid = process.pid
        while self._flusher_pid == pid:
            time.sleep(self.flush_seconds)
            try:
                self.flush()
            except Exception:  # never stop the thread; the next turn goes on
                log.exception("decision tally flush failed")

    # -- reading (GET /why) ---------------------------------------------------------------------

    def why(self, kind: str, obj: str, head=None) -> dict:
        """Every kept cycle's entries about one object, newest cycle first (``GET /why``). A job
        also lists the tasks named ``<job name>-...`` in its namespace (Volcano names a job's
        pods ``<job>-<task>-<index>``), at most ``TASKS_SHOWN`` of them."""
        self.flush()
        prefix = kind + SEP + obj + SEP
        cycles = []
        current = head.session_id if head is not None else None
        for cycle_id, opened_at, dropped in self.store.tally_cycles():
            counts, notes = self.store.tally_read(cycle_id, prefix)
            counts, notes = _relative(counts, prefix), _relative(notes, prefix)
            podgroup = None
            if kind == "job" and not counts and not notes:
                podgroup, counts, notes = self._podgroup_of(cycle_id, obj)
            entry = {"cycle": cycle_id, "opened_at": opened_at, "open": cycle_id == current,
                     "dropped_entries": dropped, **describe(kind, counts, notes)}
            if podgroup:
                entry["podgroup"] = podgroup
            if kind == "job":
                entry["tasks"] = self._tasks_of(cycle_id, obj)
            cycles.append(entry)
        return {kind: obj, "cycles": cycles}

    def _podgroup_of(self, cycle_id: str, job: str) -> tuple[str | None, dict, dict]:
        """The entries of the job's PodGroup: Volcano's job controller names it "<job>-<job UID>"
        and the scheduler's JobInfo carries that name, so ``why ml/train`` finds ``ml/train-<uid>``
        (the first such PodGroup; a UID suffix never matches another job's name)."""
        counts, notes = self.store.tally_read(cycle_id, "job" + SEP + job + "-")
        for k in [*counts, *notes]:
            podgroup = k.split(SEP, 2)[1]
            if _UID_SUFFIX.fullmatch(podgroup[len(job):]):
                prefix = "job" + SEP + podgroup + SEP
                return (podgroup, {k[len(prefix):]: v for k, v in counts.items() if k.startswith(prefix)},
                        {k[len(prefix):]: v for k, v in notes.items() if k.startswith(prefix)})
        return None, {}, {}

    def _tasks_of(self, cycle_id: str, job: str) -> dict:
        counts, notes = self.store.tally_read(cycle_id, "task" + SEP + job + "-")
        by_task: dict[str, tuple[dict, dict]] = {}
        for source, slot in ((counts, 0), (notes, 1)):
            for k, v in source.items():
                _, task, path = k.split(SEP, 2)
                if task in by_task or len(by_task) < TASKS_SHOWN:
                    by_task.setdefault(task, ({}, {}))[slot][path] = v
        return {task: describe("task", c, n) for task, (c, n) in sorted(by_task.items())}


#: tasks listed under a job in /why
TASKS_SHOWN = 100

#: what follows a job's name in its PodGroup's name: "-" and the job's UID
_UID_SUFFIX = re.compile(r"-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def _relative(entries: dict, prefix: str) -> dict:
    return {k[len(prefix):]: v for k, v in entries.items()}


_LOGGED_KINDS = tuple(kind + SEP for kind in ("job", "queue"))


def _per_session(heads: list, *columns: list):
    """(head, columns) per cycle of the calls: one group when every call saw the same head."""
    if heads.count(heads[0]) == len(heads):
        yield heads[0], columns
        return
    sessions = list(map(_SESSION_ID, heads))
    head_of = dict(zip(sessions, heads))
    for session_id in head_of:
        mine = list(map(session_id.__eq__, sessions))
        yield head_of[session_id], tuple(list(compress(column, mine)) for column in columns)


def _keep_name(names: dict, uid: str, name: str) -> None:
    """Remember a task's name by its UID (Volcano's task id, the pod's UID: one per pod, so one
    per ``NAMESPACE/NAME``); bounded, emptied when full."""
    if len(names) >= NAMES_KEPT:
        names.clear()
    names[uid] = name


def _audits(c: CycleAggregate, prefix: str, audits, request_id: str) -> None:
    for a in audits:
        if a.outcome == "skip":
            continue
        k = prefix + "a" + SEP + a.rule + SEP + a.outcome
        c.add(k)
        if a.reason:
            c.first(k, a.reason, request_id)


def _log_reason(cycle_id: str, k: str, reason: str, request_id: str) -> None:
    kind, obj, path = k.split(SEP, 2)
    verb, outcome, *rule = path.split(SEP)
    if not rule or verb not in ("q", "r", "o"):
        return
    what = {"q": f"enqueue {outcome}", "r": "not ready", "o": "overused"}[verb]
    if verb == "r" and outcome == "ready":
        what = "ready"
    log.info("cycle %s: %s %s: %s: %s", cycle_id, kind, obj, what, reason,
             extra={"request_id": request_id, "cycle": cycle_id, "object": f"{kind} {obj}",
                    "rule": rule[0], "outcome": outcome})


# ---------------------------------------------------------------------------------------------
# one object's entries as /why answers them


def describe(kind: str, counts: dict[str, int], notes: dict[str, str]) -> dict:
    """The entries of one object in one cycle (paths relative to it) as /why's JSON."""
    out: dict[str, Any] = {}
    audit: dict[str, dict] = {}
    for path, n in counts.items():
        parts = path.split(SEP)
        if parts[0] == "a" and len(parts) == 3:
            entry = audit.setdefault(parts[1], {"outcomes": {}, "reasons": {}})
            entry["outcomes"][parts[2]] = n
            if path in notes:
                entry["reasons"][parts[2]] = notes[path]
    if kind == "task":
        if "p" in counts:
            rejected: dict[str, dict[str, Any]] = {}
            for path, n in counts.items():
                parts = path.split(SEP)
                if parts[:2] == ["p", "rej"]:
                    rejected[parts[2]] = {"count": n, "example": notes.get(path, "")}
            out[PREDICATE] = {"answers": counts["p"], "fit": counts.get("p" + SEP + "fit", 0),
                                "rejected_by": dict(sorted(rejected.items(), key=lambda i: -i[1]["count"]))}
        if "s" in counts:
            top = notes.get("s" + SEP + "top")
            out[PRIORITIZE] = {"calls": counts["s"], "top_nodes": json.loads(top) if top else []}
        victims: dict[str, dict] = {}
        for path, n in counts.items():
            parts = path.split(SEP)
            if parts[0] == "v":
                entry = victims.setdefault(parts[1], {})
                entry["victims_permitted" if len(parts) == 3 else "calls_as_evictor"] = n
            elif parts[0] == "e":
                entry = victims.setdefault(parts[1], {})
                entry["as_evictee_" + parts[2]] = n
                if path in notes:
                    entry[{"protect": "protected_example"}.get(parts[2], parts[2] + "_example")] = notes[path]
        if victims:
            out["victims"] = victims
    else:
        for verb, name in (("q", "enqueue"), ("r", "ready"), ("o", "overused")):
            answers: dict[str, int] = {}
            rules: dict[str, dict] = {}
            for path, n in counts.items():
                parts = path.split(SEP)
                if parts[0] != verb:
                    continue
                if len(parts) == 2:
                    answers[parts[1]] = n
                else:
                    rules.setdefault(parts[1], {})[parts[2]] = {"count": n, "reason": notes.get(path, "")}
            if answers:
                out[name] = {"answers": answers, "by_rule": rules}
    if audit:
        out["audit"] = audit
    return out
