"""The decision tally behind ``GET /why``: what each deciding verb adds to it, and how ``/why``
and ``policy-extender why`` show it.

Each deciding verb's entry of the verb table (``table.py``) has a ``tally``: a :class:`Shape`
(one per shape of answer: :class:`PredicateShape`, :class:`ScoreShape`, :class:`VictimsShape`,
:class:`VoteShape`) that records a call (``record``), builds its part of one object's ``/why``
entry (``section``) and prints it for people (``lines``). :class:`DecisionTally` is a worker's
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

import json
import logging
import operator
import re
import threading
import time
from collections import Counter
from itertools import compress
from typing import Any, Callable, Iterable, Sequence

from policy_extender import process
from policy_extender.logs import current
from policy_extender.metrics import take_all
from policy_extender.session.tally import SEP, CycleAggregate, CycleTally

log = logging.getLogger("policy_extender.why")

#: nodes kept of the latest prioritize call
TOP_NODES = 5
#: tasks listed under a job in /why
TASKS_SHOWN = 100
#: task names remembered by UID (about 150 bytes each)
NAMES_KEPT = 65536
#: values per predicate call in the flat lists of calls waiting for a fold: a fit is (head, name),
#: a rejection (head, name, decision, request id)
FIT_FIELDS, REJECTION_FIELDS = 2, 4
#: predicate calls kept unfolded at most (the flusher folds them every ``flush_seconds``)
FOLD_AT = 20000

_FIT = SEP + "fit"
_REJ = SEP + "rej" + SEP
_SESSION_ID = operator.attrgetter("session_id")
_RULE = operator.attrgetter("rule")
#: a TaskView's UID, straight from its decoded Struct (in C)
_TASK_UID = operator.attrgetter("raw.UID")
#: what follows a job's name in its PodGroup's name: "-" and the job's UID
_UID_SUFFIX = re.compile(r"-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def object_name(view: Any) -> str:
    """``NAMESPACE/NAME`` of a task or job view (``NAME`` alone without a namespace)."""
    namespace, name = getattr(view, "namespace", None), getattr(view, "name", None)
    name = name or getattr(view, "uid", None) or "?"
    return f"{namespace}/{name}" if namespace else str(name)


# ---------------------------------------------------------------------------------------------
# the shapes: what one verb's call adds, and how /why shows it


class Shape:
    """How the calls of a deciding verb are tallied and shown (a verb table entry's ``tally``).
    ``about`` is the kind of object its entries are under, ``keys`` the keys it adds to that
    object's ``/why`` entry (one shape may serve several verbs: both victim verbs share one)."""

    about: str = "task"
    keys: tuple[str, ...] = ()

    def record(self, tally: DecisionTally, head: Any, verb: str, request: Any, decision: Any,
               outcome: str, audits: Sequence[Any], request_id: str) -> None:
        """Add one call of ``verb`` (its decoded request, decision, outcome and audits)."""
        raise NotImplementedError

    def section(self, counts: dict[str, int], notes: dict[str, str]) -> dict[str, Any]:
        """Its part of one object's ``/why`` entry in one cycle (paths relative to the object)."""
        raise NotImplementedError

    def lines(self, heading: str, data: dict[str, Any]) -> list[str]:
        """Its lines of ``policy-extender why`` for one object's ``/why`` entry ``data``."""
        raise NotImplementedError

    def logged(self, outcome: str) -> str | None:
        """What the INFO line of a first reason recorded with ``outcome`` says it was (None: not logged)."""
        return None

    def logs(self, path: str) -> bool:
        """Whether a path of this shape's entries has its first reason logged."""
        return False


class PredicateShape(Shape):
    """The predicate: recorded by ``DecisionTally.record_predicate`` (batched), shown under the
    verb's name as answers, fits and the rules that rejected."""

    def __init__(self, verb: str, path: str = "p") -> None:
        self.keys = (verb,)
        self.path = path  # its entries' first path element

    def record(self, tally, head, verb, request, decision, outcome, audits, request_id) -> None:
        tally.record_predicate(head, request.task, decision, audits, request_id)

    def section(self, counts, notes):
        path = self.path
        if path not in counts:
            return {}
        rejected = {}
        for k, n in counts.items():
            parts = k.split(SEP)
            if parts[:2] == [path, "rej"]:
                rejected[parts[2]] = {"count": n, "example": notes.get(k, "")}
        return {self.keys[0]: {"answers": counts[path], "fit": counts.get(path + _FIT, 0),
                               "rejected_by": dict(sorted(rejected.items(), key=lambda i: -i[1]["count"]))}}

    def lines(self, heading, data):
        if self.keys[0] not in data:
            return []
        p = data[self.keys[0]]
        text = f"{heading}: {p['fit']} of {p['answers']} nodes fit"
        if p["rejected_by"]:
            text += ": " + "; ".join(f"{r['count']} {r['example'] or rule}" for rule, r in p["rejected_by"].items())
        return [text]


class NodesFilterShape(PredicateShape):
    """A filter of many nodes in one call (kube-scheduler's): each node checked counts as one
    answer, under ``path``, shown as the predicate's are."""

    def record(self, tally, head, verb, request, decision, outcome, audits, request_id) -> None:
        if head is None or not tally.enabled:
            return
        tally.started()
        prefix = "task" + SEP + object_name(request.task) + SEP + self.path
        rejected: dict[str, list] = {}
        fit = 0
        for each in decision.decisions:
            if each.fits:
                fit += 1
            else:
                found = rejected.setdefault(each.rule or "", [0, each.reason])
                found[0] += 1
        with tally.lock:
            c = tally.cycle(head)
            if decision.decisions:
                c.add(prefix, len(decision.decisions))
            if fit:
                c.add(prefix + _FIT, fit)
            for rule, (n, reason) in rejected.items():
                c.add(prefix + _REJ + rule, n)
                c.first(prefix + _REJ + rule, reason, request_id)
            if audits:
                add_audits(c, "task" + SEP + object_name(request.task) + SEP, audits, request_id)


class ScoreShape(Shape):
    """Prioritize: its calls per task and the latest call's top nodes, shown under the verb's name."""

    def __init__(self, verb: str, path: str = "s") -> None:
        self.keys = (verb,)
        self.path = path  # its entries' first path element

    def record(self, tally, head, verb, request, decision, outcome, audits, request_id) -> None:
        if head is None or not tally.enabled:
            return
        tally.started()
        prefix = "task" + SEP + object_name(request.task) + SEP
        top = sorted(decision.scores.items(), key=lambda item: (-item[1], item[0]))[:TOP_NODES]
        shown = [{"node": name, "score": score,
                  "rules": {rule: per[name] for rule, per in decision.per_rule.items() if name in per}}
                 for name, score in top]
        note = json.dumps(shown, separators=(",", ":"))
        with tally.lock:
            c = tally.cycle(head)
            c.add(prefix + self.path)
            if top:  # preempt's prioritize of no nodes (Volcano v1.14+) keeps the latest scores shown
                c.last(prefix + self.path + SEP + "top", note)
            if audits:
                add_audits(c, prefix, audits, request_id)

    def section(self, counts, notes):
        if self.path not in counts:
            return {}
        top = notes.get(self.path + SEP + "top")
        return {self.keys[0]: {"calls": counts[self.path], "top_nodes": json.loads(top) if top else []}}

    def lines(self, heading, data):
        if self.keys[0] not in data:
            return []
        s = data[self.keys[0]]
        best = ", ".join(f"{n['node']} {_number(n['score'])}" + (
            " (" + ", ".join(f"{rule} {_number(v)}" for rule, v in n["rules"].items()) + ")" if n["rules"] else "")
            for n in s["top_nodes"])
        return [f"{heading}: scored {s['calls']} time{'s' if s['calls'] != 1 else ''}; best nodes of the "
                f"latest: {best or 'none'}"]


class VictimsShape(Shape):
    """Preemptable and reclaimable: per verb, the task's calls as evictor and its answers as an
    evictee, shown under ``victims``."""

    #: what an Abstain answer does with the proposed victims: Volcano drops the plugin's vote
    #: (the tier's other plugins choose); kube-scheduler's preempt passes them all through
    abstain_passes = False

    def __init__(self, key: str = "victims", evictor_path: str = "v", evictee_path: str = "e") -> None:
        self.keys = (key,)
        self.paths = (evictor_path, evictee_path)  # its entries' first path elements

    def record(self, tally, head, verb, request, decision, outcome, audits, request_id) -> None:
        if head is None or not tally.enabled:
            return
        tally.started()
        prefix = "task" + SEP + object_name(request.evictor) + SEP
        with tally.lock:
            c = tally.cycle(head)
            self.record_evictees(c, prefix, verb, request.evictees, decision, request_id)
            if audits:
                add_audits(c, prefix, audits, request_id)

    def record_evictees(self, c: CycleAggregate, prefix: str, verb: str, evictees: Sequence[Any], decision: Any,
                        request_id: str) -> None:
        """One answer about ``evictees`` (a ``VictimDecision``), ``prefix`` the evictor's (lock held)."""
        evictor_path, evictee_path = self.paths
        victims = set(decision.victims)
        # refused by a rule: protected when the answer permits; when it abstains (`if none
        # abstain`), the tier's other plugins decide and may evict the pod all the same
        refused = "protect" if decision.status else "abstain"
        passed = not decision.status and self.abstain_passes  # every proposed victim goes back
        c.add(prefix + evictor_path + SEP + verb)
        c.add(prefix + evictor_path + SEP + verb + SEP + ("permit" if decision.status else "abstain"))
        if victims:
            c.add(prefix + evictor_path + SEP + verb + SEP + "victims", len(victims))
        if passed and evictees:
            c.add(prefix + evictor_path + SEP + verb + SEP + "passed", len(evictees))
        for i, evictee in enumerate(evictees):
            other = "task" + SEP + object_name(evictee) + SEP + evictee_path + SEP + verb + SEP
            if i in victims:
                c.add(other + "evict")
            elif passed:
                c.add(other + "passed")
            elif i in decision.reasons:
                c.add(other + refused)
                c.first(other + refused, decision.reasons[i], request_id)

    def section(self, counts, notes):
        evictor_path, evictee_path = self.paths
        victims: dict[str, dict] = {}
        for path, n in counts.items():
            parts = path.split(SEP)
            if parts[0] == evictor_path:
                entry = victims.setdefault(parts[1], {})
                entry[_EVICTOR_KEYS[parts[2]] if len(parts) == 3 else "calls_as_evictor"] = n
            elif parts[0] == evictee_path:
                entry = victims.setdefault(parts[1], {})
                entry["as_evictee_" + parts[2]] = n
                if path in notes:
                    entry[{"protect": "protected_example"}.get(parts[2], parts[2] + "_example")] = notes[path]
        return {self.keys[0]: victims} if victims else {}

    def lines(self, heading, data):
        lines = []
        for verb, v in (data.get(self.keys[0]) or {}).items():
            parts = []
            if "calls_as_evictor" in v:
                parts.append(self.evictor_words(v))
            if "as_evictee_evict" in v:
                parts.append(f"{v['as_evictee_evict']} times permitted as a victim")
            if "as_evictee_passed" in v:
                parts.append(f"{v['as_evictee_passed']} times passed through as a victim (no rule applied)")
            if "as_evictee_protect" in v:
                parts.append(f"{v['as_evictee_protect']} times protected: {v.get('protected_example', '')}")
            if "as_evictee_abstain" in v:
                parts.append(f"{v['as_evictee_abstain']} times refused by a rule in an Abstain answer (if none "
                             f"abstain: the tier's other plugins decided): {v.get('abstain_example', '')}")
            lines.append(f"{heading}: {verb}: " + "; ".join(parts))
        return lines

    def evictor_words(self, v: dict[str, int]) -> str:
        """The evictor's calls by answer: a Permit names its victims; an Abstain is no opinion,
        which Volcano's tier fills with its other plugins' victims and kube-scheduler with every
        victim it proposed (``victims_passed_through``): never "0 victims permitted"."""
        calls, permits, abstains = v["calls_as_evictor"], v.get("answered_permit"), v.get("answered_abstain")
        if permits is None and abstains is None:  # a cycle tallied before answers were counted
            return f"as evictor asked {calls} times, {v.get('victims_permitted', 0)} victims permitted"
        parts = []
        if permits:
            victims = v.get("victims_permitted", 0)
            parts.append(f"{permits} answered Permit with {victims} victim{'s' if victims != 1 else ''}"
                         + (" (every proposed victim protected)" if not victims else ""))
        if abstains and self.abstain_passes:
            passed = v.get("victims_passed_through", 0)
            parts.append(f"{abstains} with no rule applied: the {passed} victim{'s' if passed != 1 else ''} "
                         "proposed passed through as they came")
        elif abstains:
            parts.append(f"{abstains} answered Abstain (no opinion: the tier's other plugins chose the victims)")
        return f"as evictor asked {calls} time{'s' if calls != 1 else ''}: " + "; ".join(parts)


#: a /why evictor key per ``v␟<verb>␟<what>`` path
_EVICTOR_KEYS = {"victims": "victims_permitted", "permit": "answered_permit", "abstain": "answered_abstain",
                 "passed": "victims_passed_through"}


class VoteShape(Shape):
    """A verb answered with one value about a job or a queue (jobEnqueueable, jobReady,
    queueOverused): its outcomes, and per rule its count and first reason, under ``path``."""

    def __init__(self, about: str, path: str, name: str, subject: Callable[[Any], str],
                 words: dict[str, str], logged: Callable[[str], str]) -> None:
        self.about = about        # "job" or "queue"
        self.path = path          # its entries' first path element ("q", "r", "o")
        self.keys = (name,)       # its key in /why ("enqueue", "ready", "overused")
        self.subject = subject    # request -> the object's name
        self.words = words        # outcome -> its words in `policy-extender why`, deciding first
        self.log_words = logged   # outcome -> what its INFO line calls it

    def record(self, tally, head, verb, request, decision, outcome, audits, request_id) -> None:
        if head is None or not tally.enabled:
            return
        tally.started()
        prefix = self.about + SEP + self.subject(request) + SEP
        rule, reason = decision.rule, decision.reason
        with tally.lock:
            c = tally.cycle(head)
            c.add(prefix + self.path + SEP + outcome)
            if rule:
                k = prefix + self.path + SEP + outcome + SEP + rule
                c.add(k)
                if reason:
                    c.first(k, reason, request_id)
            if audits:
                add_audits(c, prefix, audits, request_id)

    def logs(self, path: str) -> bool:
        return path.startswith(self.path + SEP)

    def logged(self, outcome: str) -> str | None:
        return self.log_words(outcome)

    def section(self, counts, notes):
        answers: dict[str, int] = {}
        rules: dict[str, dict] = {}
        for path, n in counts.items():
            parts = path.split(SEP)
            if parts[0] != self.path:
                continue
            if len(parts) == 2:
                answers[parts[1]] = n
            else:
                rules.setdefault(parts[1], {})[parts[2]] = {"count": n, "reason": notes.get(path, "")}
        return {self.keys[0]: {"answers": answers, "by_rule": rules}} if answers else {}

    def lines(self, heading, data):
        if self.keys[0] not in data:
            return []
        return [f"{heading}: " + _answers(self.keys[0], data[self.keys[0]], self.words)]


class PerNodeVictimsShape(VictimsShape):
    """Victims asked for many nodes in one call (kube-scheduler's preempt): each node's answer
    is recorded as one victims answer (``request.nodes[i].pods``, ``decision.per_node[i]``); a
    node where no rule applied passes every proposed victim through (``kube_table``)."""

    abstain_passes = True

    def record(self, tally, head, verb, request, decision, outcome, audits, request_id) -> None:
        if head is None or not tally.enabled:
            return
        tally.started()
        prefix = "task" + SEP + object_name(request.evictor) + SEP
        with tally.lock:
            c = tally.cycle(head)
            for node, answer in zip(request.nodes, decision.per_node):
                self.record_evictees(c, prefix, verb, node.pods, answer, request_id)
            if audits:
                add_audits(c, prefix, audits, request_id)


#: the one shape both victim verbs share (their entries are keyed by verb)
VICTIMS = VictimsShape()


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


def shapes_of(verbs: Iterable[Any]) -> tuple[Shape, ...]:
    """The tally shapes of a verb table's deciding verbs, each once, in the table's order."""
    found: list[Shape] = []
    for verb in verbs:
        if verb.tally is not None and verb.tally not in found:
            found.append(verb.tally)
    return tuple(found)


# ---------------------------------------------------------------------------------------------
# audit rules (any verb)


def add_audits(c: CycleAggregate, prefix: str, audits: Sequence[Any], request_id: str) -> None:
    """Each audited rule's would-be outcome under the object (``a␟<rule>␟<outcome>``)."""
    for a in audits:
        if a.outcome == "skip":
            continue
        k = prefix + "a" + SEP + a.rule + SEP + a.outcome
        c.add(k)
        if a.reason:
            c.first(k, a.reason, request_id)


def _audit_section(counts: dict[str, int], notes: dict[str, str]) -> dict[str, Any]:
    audit: dict[str, dict] = {}
    for path, n in counts.items():
        parts = path.split(SEP)
        if parts[0] == "a" and len(parts) == 3:
            entry = audit.setdefault(parts[1], {"outcomes": {}, "reasons": {}})
            entry["outcomes"][parts[2]] = n
            if path in notes:
                entry["reasons"][parts[2]] = notes[path]
    return {"audit": audit} if audit else {}


def _audit_lines(heading: str, data: dict[str, Any]) -> list[str]:
    lines = []
    for rule, a in (data.get("audit") or {}).items():
        outcomes = ", ".join(f"{n} {o}" for o, n in sorted(a["outcomes"].items()))
        example = next(iter(a["reasons"].values()), "")
        lines.append(f"{heading}: audit rule {rule} (changes no answer) would have: {outcomes}"
                     + (f"; e.g. {example}" if example else ""))
    return lines


# ---------------------------------------------------------------------------------------------
# one object's entries as /why answers them, and as `policy-extender why` prints them


def describe(shapes: Sequence[Shape], kind: str, counts: dict[str, int], notes: dict[str, str]) -> dict:
    """The entries of one object in one cycle (paths relative to it) as /why's JSON."""
    out: dict[str, Any] = {}
    for shape in shapes:
        if shape.about == kind:
            out.update(shape.section(counts, notes))
    out.update(_audit_section(counts, notes))
    return out


def lines(shapes: Sequence[Shape], kind: str, name: str, data: dict[str, Any]) -> list[str]:
    """The lines of ``policy-extender why`` for one object's /why entry in one cycle."""
    heading = f"{kind} {name}"
    found: list[str] = []
    for shape in shapes:
        found += shape.lines(heading, data)
    return found + _audit_lines(heading, data)


def shown_keys(shapes: Sequence[Shape]) -> tuple[str, ...]:
    """Every key a /why entry may have that says something was decided."""
    return tuple(k for shape in shapes for k in shape.keys) + ("audit",)


def _answers(what: str, data: dict, words: dict[str, str]) -> str:
    """The deciding outcome first (a rejection before a permit before the neutral answer)."""
    answers, by_rule = data["answers"], data["by_rule"]
    total = sum(answers.values())
    for outcome in words:
        if outcome not in answers:
            continue
        rules = by_rule.get(outcome, {})
        if rules:
            rule, found = max(rules.items(), key=lambda item: item[1]["count"])
            text = f"{words[outcome]} {found['reason'] or rule}"
        else:
            text = words[outcome]
        return f"{text} ({answers[outcome]} of {total} {what} answers)"
    return f"{total} {what} answers"


def _number(value: Any) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:.3g}"


# ---------------------------------------------------------------------------------------------
# a worker's tally


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

    def record_predicate(self, head, task, decision, audits=(), request_id: str | None = None) -> None:
        """The hot path (one call per node per task): the task's name (from a cache by UID) and
        the call's values added to a flat list with one ``extend``, no lock (``list.extend`` with
        a tuple is atomic), nothing the garbage collector tracks. The flusher folds them into the
        cycle's aggregate (``_fold_predicates``), as does a read of ``/why``; past ``FOLD_AT``
        waiting calls, the calling thread does. ``request_id`` None: this thread's
        (``logs.current``), read only for a rejection or audits, which keep it."""
        if head is None or not self.enabled:
            return
        if self.flusher_pid is not process.pid:  # another int object only after a fork
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
                        c.add(k + _FIT, count, count)
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

    def why(self, kind: str, obj: str, head=None) -> dict:
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
