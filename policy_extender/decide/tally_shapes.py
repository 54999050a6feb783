"""The tally shapes: what one deciding verb's call adds to the decision tally behind ``GET /why``,
and how ``/why`` and ``policy-extender why`` show it (the paths are listed in ``tallying.py``).

Each deciding verb's entry of the verb table (``table.py``) has a ``tally``: a :class:`Shape`
(one per shape of answer: :class:`PredicateShape`, :class:`ScoreShape`, :class:`VictimsShape`,
:class:`VoteShape`) that records a call (``record``), builds its part of one object's ``/why``
entry (``section``) and prints it for people (``lines``).
"""

from __future__ import annotations

import json
from typing import Any, Callable, Iterable, Sequence

from policy_extender.session.tally import SEP, CycleAggregate, CycleTally

#: nodes kept of the latest prioritize call
TOP_NODES = 5
#: the path of a fitting predicate answer, and the prefix of a rejection's, under the verb's path
FIT = SEP + "fit"
REJ = SEP + "rej" + SEP


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

    def record(self, tally: CycleTally, head: Any, verb: str, request: Any, decision: Any,
               outcome: str, audits: Sequence[Any], request_id: str) -> None:
        """Add one call of ``verb`` (its decoded request, decision, outcome and audits) to ``tally``
        (a ``tallying.DecisionTally``)."""
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

    def record(self, tally: Any, head: Any, verb: str, request: Any, decision: Any, outcome: str,
               audits: Sequence[Any], request_id: str) -> None:
        tally.record_predicate(head, request.task, decision, audits, request_id)

    def section(self, counts: dict[str, int], notes: dict[str, str]) -> dict[str, Any]:
        path = self.path
        if path not in counts:
            return {}
        rejected: dict[str, dict[str, Any]] = {}
        for k, n in counts.items():
            parts = k.split(SEP)
            if parts[:2] == [path, "rej"]:
                rejected[parts[2]] = {"count": n, "example": notes.get(k, "")}
        return {self.keys[0]: {"answers": counts[path], "fit": counts.get(path + FIT, 0),
                               "rejected_by": dict(sorted(rejected.items(), key=lambda i: -i[1]["count"]))}}

    def lines(self, heading: str, data: dict[str, Any]) -> list[str]:
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

    def record(self, tally: Any, head: Any, verb: str, request: Any, decision: Any, outcome: str,
               audits: Sequence[Any], request_id: str) -> None:
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
                c.add(prefix + FIT, fit)
            for rule, (n, reason) in rejected.items():
                c.add(prefix + REJ + rule, n)
                c.first(prefix + REJ + rule, reason, request_id)
            if audits:
                add_audits(c, "task" + SEP + object_name(request.task) + SEP, audits, request_id)


class ScoreShape(Shape):
    """Prioritize: its calls per task and the latest call's top nodes, shown under the verb's name."""

    def __init__(self, verb: str, path: str = "s") -> None:
        self.keys = (verb,)
        self.path = path  # its entries' first path element

    def record(self, tally: Any, head: Any, verb: str, request: Any, decision: Any, outcome: str,
               audits: Sequence[Any], request_id: str) -> None:
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

    def section(self, counts: dict[str, int], notes: dict[str, str]) -> dict[str, Any]:
        if self.path not in counts:
            return {}
        top = notes.get(self.path + SEP + "top")
        return {self.keys[0]: {"calls": counts[self.path], "top_nodes": json.loads(top) if top else []}}

    def lines(self, heading: str, data: dict[str, Any]) -> list[str]:
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

    def record(self, tally: Any, head: Any, verb: str, request: Any, decision: Any, outcome: str,
               audits: Sequence[Any], request_id: str) -> None:
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

    def section(self, counts: dict[str, int], notes: dict[str, str]) -> dict[str, Any]:
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

    def lines(self, heading: str, data: dict[str, Any]) -> list[str]:
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

    def record(self, tally: Any, head: Any, verb: str, request: Any, decision: Any, outcome: str,
               audits: Sequence[Any], request_id: str) -> None:
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

    def section(self, counts: dict[str, int], notes: dict[str, str]) -> dict[str, Any]:
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

    def lines(self, heading: str, data: dict[str, Any]) -> list[str]:
        if self.keys[0] not in data:
            return []
        return [f"{heading}: " + _answers(self.keys[0], data[self.keys[0]], self.words)]


class PerNodeVictimsShape(VictimsShape):
    """Victims asked for many nodes in one call (kube-scheduler's preempt): each node's answer
    is recorded as one victims answer (``request.nodes[i].pods``, ``decision.per_node[i]``); a
    node where no rule applied passes every proposed victim through (``kube_table``)."""

    abstain_passes = True

    def record(self, tally: Any, head: Any, verb: str, request: Any, decision: Any, outcome: str,
               audits: Sequence[Any], request_id: str) -> None:
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
