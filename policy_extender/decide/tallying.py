"""The decision tally behind ``GET /why``: what each deciding verb adds to it, and how ``/why``
and ``policy-extender why`` show it.

Each deciding verb's entry of the verb table (``table.py``) has a ``tally``: a ``Shape`` of
``tally_shapes.py`` that records a call, builds its part of one object's ``/why`` entry and
prints it for people. :class:`DecisionTally` is a worker's
tally: the storage of ``session/tally.py`` (``CycleTally``), the predicate's batched recording
(the one call per node per task), and ``why``, the ``/why`` answer built from the shapes of the
verbs it is given. Calls answered without a session are not tallied.

Paths under an object's key (``session/tally.py``: ``<kind>␟<object>␟<path>``):

==========================  ==========================================================
path                        meaning
==========================  ==========================================================
``p``                       task: predicate answers (one per node checked)
``p␟fit``                   task: of them, the node fits
``p␟rej␟<rule>``            task: rejected by ``rule`` (example note: its reason)
``s`` / ``s␟top``           task: prioritize calls / latest note: the top nodes, with each
                            rule's contribution (JSON)
``v␟<verb>[␟victims]``      task as evictor: preemptable/reclaimable calls [victims permitted]
``v␟<verb>␟permit|abstain`` task as evictor: of them, answered Permit / Abstain
``v␟<verb>␟passed``         task as evictor: victims passed through as proposed by an answer
                            with no rule applied (kube-scheduler's preempt only)
``e␟<verb>␟evict|protect|abstain|passed``  task as evictee: answered as a victim / protected /
                             refused by a rule in an Abstain answer (example note) / passed
                             through as a victim with no rule applied (kube-scheduler)
``q␟<outcome>[␟<rule>]``    job: jobEnqueueable permit/reject/abstain [by rule] (note)
``r␟<ready|not_ready>...``  job: jobReady answers [by rule] (note)
``o␟<overused|...>...``     queue: queueOverused answers [by rule] (note)
``a␟<rule>␟<outcome>``      any: an audited rule's would-be outcome (note: its reason)
``kf``, ``kf␟fit``, ...     task (a pod): kube-scheduler's filter, one answer per node, as ``p``
``ks`` / ``ks␟top``         task: kube-scheduler's prioritize calls / latest top nodes (0..10)
``kv␟<verb>...``, ``ke...`` task: kube-scheduler's preempt, per node, as ``v`` and ``e``
==========================  ==========================================================

(``␟`` is the separator ``\\x1f``.) kube-scheduler's calls have no session: they are tallied in
the cycle of their window of time (:func:`window_head`). The first reason of an enqueue, overused
or ready rule for one object in one cycle is logged at INFO by the flush that stored it, with the request id of the
call that decided it: once per (cycle, object, rule) across every worker and replica, since the
store says which example notes were new.
"""

from __future__ import annotations

import logging
import operator
import re
import threading
import time
from collections import Counter
from itertools import compress
from typing import Any, Iterable, Iterator, Sequence

from policy_extender import process
from policy_extender.decide.tally_shapes import FIT, REJ, PredicateShape, add_audits, describe, object_name, shapes_of
from policy_extender.logs import current
from policy_extender.metrics import take_all
from policy_extender.session.tally import SEP, CycleAggregate, CycleTally

log = logging.getLogger("policy_extender.why")

#: tasks listed under a job in /why
TASKS_SHOWN = 100
#: task names remembered by UID (about 150 bytes each)
NAMES_KEPT = 65536
#: values per predicate call in the flat lists of calls waiting for a fold: a fit is (head, name),
#: a rejection (head, name, decision, request id)
FIT_FIELDS, REJECTION_FIELDS = 2, 4
#: predicate calls kept unfolded at most (the flusher folds them every ``flush_seconds``)
FOLD_AT = 20000

_SESSION_ID = operator.attrgetter("session_id")
_RULE = operator.attrgetter("rule")
#: a TaskView's UID, straight from its decoded Struct (in C)
_TASK_UID = operator.attrgetter("raw.UID")
#: what follows a job's name in its PodGroup's name: "-" and the job's UID
_UID_SUFFIX = re.compile(r"-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")




class WindowHead:
    """The cycle a call without a session is tallied in: a window of ``WINDOW_SECONDS`` (a
    scheduler without sessions, kube-scheduler, has no cycle of its own). ``session_id`` names
    the protocol and the window's start, ``opened_at`` is that start."""

    __slots__ = ("session_id", "opened_at")

    def __init__(self, session_id: str, opened_at: float) -> None:
        self.session_id, self.opened_at = session_id, opened_at


#: seconds of calls a window cycle holds (``window_head``)
WINDOW_SECONDS = 60
_windows: dict[str, WindowHead] = {}


def window_head(protocol: str, now: float | None = None) -> WindowHead:
    """The window cycle of ``protocol`` holding the time ``now`` (the same object for the whole window)."""
    start = float(int(time.time() if now is None else now) // WINDOW_SECONDS * WINDOW_SECONDS)
    found = _windows.get(protocol)
    if found is None or found.opened_at != start:
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(start))
        found = _windows[protocol] = WindowHead(f"{protocol}@{stamp}", start)
    return found


# ---------------------------------------------------------------------------------------------
# a worker's tally


#: The tally's kind of the per-verb call counts (``DecisionTally.note_call``), and the entry of
#: it that marks a cycle opened by the scheduler (not a window of calls without sessions).
CALLS = "verb"
OPENED = "(opened)"


class DecisionTally(CycleTally):
    """One process's tally of the decisions of ``verbs`` (a verb table's entries): the storage
    (``CycleTally``), the predicate's batched recording, and ``why`` for ``GET /why``."""

    def __init__(self, store: Any, verbs: Iterable[Any], **settings: Any) -> None:
        super().__init__(store, **settings)
        self.shapes = shapes_of(verbs)
        #: predicate calls not yet folded into the aggregates, flat: FIT_FIELDS / REJECTION_FIELDS
        #: values per call (strings, and the head and decision that exist anyway: nothing new
        #: for the garbage collector to track)
        self._fitted: list = []
        self._rejected: list = []
        self._names: dict[str, str] = {}  # task UID -> object_name
        self._fold_lock = threading.Lock()
        #: the predicate's verb name, whose calls are counted as they fold (``note_call``)
        self._predicate = next((s.keys[0] for s in self.shapes if isinstance(s, PredicateShape)), "")

    def record_predicate(self, head: Any, task: Any, decision: Any, audits: Sequence[Any] = (),
                         request_id: str | None = None) -> None:
        """The hot path (one call per node per task): the task's name (from a cache by UID) and
        the call's values added to a flat list with one ``extend``, no lock (``list.extend`` with
        a tuple is atomic), nothing the garbage collector tracks. The flusher folds them into the
        cycle's aggregate (``_fold_predicates``), as does a read of ``/why``; past ``FOLD_AT``
        waiting calls, the calling thread does. ``request_id`` None: this thread's
        (``logs.current``), read only for a rejection or audits, which keep it."""
        if head is None or not self.enabled:
            return
        if self.flusher_pid != process.pid:  # a forked child: its flusher is not running
            self.start_flusher()
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
            with self.lock:
                add_audits(self.cycle(head), f"task{SEP}{name}{SEP}", audits, request_id)

    def note_call(self, head: Any, verb: str, n: int = 1) -> None:
        """``n`` calls of ``verb`` in the cycle of ``head``: the entry ``verb\x1f<verb>\x1fn`` that
        ``decide.unserved`` reads to tell which verbs Volcano called in each cycle; one per verb,
        so kept past the worker's cap (the store's cap may still drop it: a cycle with drops is
        no evidence there)."""
        if head is None or not self.enabled or n <= 0:
            return
        self.started()
        with self.lock:
            self.cycle(head).add_beyond_cap(f"{CALLS}{SEP}{verb}{SEP}n", n)

    def record_open(self, head: Any) -> None:
        super().record_open(head)
        self.note_call(head, OPENED)

    def waiting(self) -> int:
        """How many predicate calls wait for the next fold."""
        return len(self._fitted) // FIT_FIELDS + len(self._rejected) // REJECTION_FIELDS

    def take(self) -> dict[str, CycleAggregate]:
        self._fold_predicates()
        return super().take()

    def forget_inherited(self) -> None:
        super().forget_inherited()
        self._fitted, self._rejected = [], []

    def _fold_predicates(self) -> None:
        """Add the predicate calls recorded since the last fold to their cycles' aggregates: the
        same counts, first reasons (with their request ids) and drops as adding them one by one
        (which entries a full aggregate drops may differ), with the passes over the calls in C
        (a slice per field, ``map``, ``zip``, ``Counter``) and Python code once per task and outcome."""
        with self._fold_lock:
            fitted, rejected = take_all(self._fitted), take_all(self._rejected)
        if fitted:
            for head, (names,) in _per_session(fitted[0::FIT_FIELDS], fitted[1::FIT_FIELDS]):
                with self.lock:
                    c = self.cycle(head)
                    for name, count in Counter(names).items():
                        k = f"task{SEP}{name}{SEP}p"
                        c.add(k, count, count)
                        c.add(k + FIT, count, count)
                    c.add_beyond_cap(f"{CALLS}{SEP}{self._predicate}{SEP}n", len(names))
        if rejected:
            step = REJECTION_FIELDS
            for head, (names, decisions, request_ids) in _per_session(
                    rejected[0::step], rejected[1::step], rejected[2::step], rejected[3::step]):
                rules = list(map(_RULE, decisions))
                examples = None
                with self.lock:
                    c = self.cycle(head)
                    # Counter(zip(...)) keeps a tuple per distinct answer only: zip reuses the rest
                    for answer, count in Counter(zip(names, rules)).items():
                        name, rule = answer
                        k = f"task{SEP}{name}{SEP}p"
                        c.add(k, count, count)
                        k += REJ + (rule or "")
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
                    c.add_beyond_cap(f"{CALLS}{SEP}{self._predicate}{SEP}n", len(names))

    def note_was_new(self, cycle_id: str, k: str, note: str, request_id: str) -> None:
        """The first reason of a job's or queue's rule in the cycle, across every worker: logged."""
        kind, obj, path = k.split(SEP, 2)
        shape = next((s for s in self.shapes if s.about == kind and s.logs(path)), None)
        if shape is None:
            return
        _, outcome, *rule = path.split(SEP)
        if not rule:
            return
        log.info("cycle %s: %s %s: %s: %s", cycle_id, kind, obj, shape.logged(outcome), note,
                 extra={"request_id": request_id, "cycle": cycle_id, "object": f"{kind} {obj}",
                        "rule": rule[0], "outcome": outcome})

    # -- reading (GET /why) ---------------------------------------------------------------------

    def why(self, kind: str, obj: str, head: Any = None) -> dict:
        """Every kept cycle's entries about one object, newest cycle first (``GET /why``). A job
        also lists the tasks named ``<job name>-...`` in its namespace (Volcano names a job's
        pods ``<job>-<task>-<index>``), at most ``TASKS_SHOWN`` of them."""
        cycles = []
        current_id = head.session_id if head is not None else None
        for cycle_id, opened_at, dropped, counts, notes in self.read(kind + SEP + obj + SEP):
            podgroup = None
            if kind == "job" and not counts and not notes:
                podgroup, counts, notes = self._podgroup_of(cycle_id, obj)
            entry = {"cycle": cycle_id, "opened_at": opened_at, "open": cycle_id == current_id,
                     "dropped_entries": dropped, **describe(self.shapes, kind, counts, notes)}
            if podgroup:
                entry["podgroup"] = podgroup
            if kind == "job":
                entry["tasks"] = self._tasks_of(cycle_id, obj)
            if kind == "task" and (job := self._job_of_task(cycle_id, obj)) is not None:
                entry["job"] = job
            cycles.append(entry)
        return {kind: obj, "cycles": cycles}

    def _job_of_task(self, cycle_id: str, task: str) -> dict | None:
        """What the cycle decided about the job of a task named as Volcano names a job's pods,
        ``<job>-<task>-<index>`` (the index a number): the job's enqueue and ready answers hold
        all of its tasks, which are then never sent to a predicate. The longest such job name
        (or its PodGroup, ``<job>-<uid>``) with entries in the cycle; None when none has any."""
        namespace, _, name = task.partition("/")
        parts = name.split("-")
        if len(parts) < 3 or not parts[-1].isdigit():
            return None
        for cut in range(len(parts) - 2, 0, -1):
            job = f"{namespace}/{'-'.join(parts[:cut])}"
            counts, notes = self.read_cycle(cycle_id, "job" + SEP + job + SEP)
            podgroup = None
            if not counts and not notes:
                podgroup, counts, notes = self._podgroup_of(cycle_id, job)
            section = describe(self.shapes, "job", counts, notes)
            if section:
                return {"name": job, **({"podgroup": podgroup} if podgroup else {}), **section}
        return None

    def _podgroup_of(self, cycle_id: str, job: str) -> tuple[str | None, dict, dict]:
        """The entries of the job's PodGroup: Volcano's job controller names it "<job>-<job UID>"
        and the scheduler's JobInfo carries that name, so ``why ml/train`` finds ``ml/train-<uid>``
        (the first such PodGroup; a UID suffix never matches another job's name)."""
        counts, notes = self.read_cycle(cycle_id, "job" + SEP + job + "-")
        for k in [*counts, *notes]:
            uid = k.split(SEP, 1)[0]  # after "<job>-"
            if _UID_SUFFIX.fullmatch("-" + uid):
                prefix = uid + SEP
                return (f"{job}-{uid}", {k[len(prefix):]: v for k, v in counts.items() if k.startswith(prefix)},
                        {k[len(prefix):]: v for k, v in notes.items() if k.startswith(prefix)})
        return None, {}, {}

    def _tasks_of(self, cycle_id: str, job: str) -> dict:
        counts, notes = self.read_cycle(cycle_id, "task" + SEP + job + "-")
        by_task: dict[str, tuple[dict, dict]] = {}
        for source, slot in ((counts, 0), (notes, 1)):
            for k, v in source.items():
                rest, path = k.split(SEP, 1)
                task = job + "-" + rest
                if task in by_task or len(by_task) < TASKS_SHOWN:
                    by_task.setdefault(task, ({}, {}))[slot][path] = v
        return {task: describe(self.shapes, "task", c, n) for task, (c, n) in sorted(by_task.items())}


def _per_session(heads: list, *columns: list) -> Iterator[tuple[Any, tuple[list, ...]]]:
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
