"""What changed between two answers to the same recorded call (recorded vs candidate, or current
vs candidate), in the scheduler's terms: fit flips with the rule that now decides, top-ranked
node changes and large score moves, victim changes, and enqueue/overused/ready flips. A change
of HTTP status (an answer turned into an error, or back) is a change too.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Callable

import orjson

from policy_extender.decide.kube_table import KUBE_VERBS
from policy_extender.decide.table import VERBS

from .engine import HttpAnswer


@dataclass(frozen=True)
class DecisionChange:
    cycle: str
    index: int            # the call's position in its cycle, from 1
    verb: str
    subject: str          # the task, job or queue the call is about
    node: str             # the node (predicate, score moves), else ""
    kind: str             # now unfit / now fits / code / rejecting rule / top node / score / ...
    before: str
    after: str
    rule: str             # the rule that now decides (or decided before, for "now fits")
    where: str            # file:offset of the recorded call

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Options:
    score_threshold: float = 10.0   # a node's score move at least this large is reported


@dataclass(frozen=True)
class Subject:
    """Who a call is about, read from its request body only when something changed."""

    name: str
    node: str


def subject_of(verb: str, request: bytes) -> Subject:
    try:
        body = orjson.loads(request)
    except orjson.JSONDecodeError:
        return Subject("(undecodable body)", "")
    if not isinstance(body, dict):
        return Subject("?", "")
    pod = body.get("Pod")  # kube-scheduler's calls: a v1.Pod
    if isinstance(pod, dict):
        meta = pod.get("metadata")
        meta = meta if isinstance(meta, dict) else {}
        return Subject(_name({"Namespace": meta.get("namespace"), "Name": meta.get("name", "?")}), "")
    head = body.get("task") or body.get("evictor") or body.get("job") or body.get("queue") or {}
    node = (body.get("node") or {}).get("Name", "") if isinstance(body.get("node"), dict) else ""
    return Subject(_name(head), node)


def _name(obj: Any) -> str:
    if not isinstance(obj, dict):
        return "?"
    namespace, name = obj.get("Namespace"), obj.get("Name", "?")
    return f"{namespace}/{name}" if namespace else str(name)


def compare(verb: str, before: HttpAnswer, after: HttpAnswer, decision: Callable[[], Any],
            options: Options = Options()) -> list[tuple[str, str, str, str, str]]:
    """(kind, node, before, after, rule) for each difference; ``decision()`` gives the candidate's
    decision object (asked only when something changed)."""
    if before.status != 200 or after.status != 200:
        if before.status == after.status:
            return []
        return [("http status", "", _status_text(before), _status_text(after), "")]
    kube = KUBE_VERBS.get(verb)
    if kube is not None:
        return KUBE_COMPARERS[kube.answer](_any_json(before.body), _any_json(after.body), decision, options)
    old, new = _json(before.body), _json(after.body)
    entry = VERBS[verb]
    if entry.answer == "vote":  # enqueue's status is a Permit/Abstain/Reject int, the others bools
        show = _word if entry.value_name == "status" else (lambda v: str(v).lower())
        return _flip(entry.answer_key, entry.decision, show)(old, new, decision, options)
    return COMPARERS[entry.answer](old, new, decision, options)


def _json(body: bytes) -> dict:
    try:
        value = orjson.loads(body)
    except orjson.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}


def _any_json(body: bytes) -> Any:
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError:
        return None


def _status_text(answer: HttpAnswer) -> str:
    if answer.status == 200:
        return "200"
    found = _json(answer.body)
    error = found.get("error") or found.get("Error") or ""
    return f"{answer.status} {error}".strip()


def _rule(decision: Callable[[], Any]) -> str:
    try:
        return getattr(decision(), "rule", None) or ""
    except Exception as error:  # the body decoded for the answer; this is belt and braces
        return f"(decision unavailable: {error})"


def _predicate(old: dict, new: dict, decision, options: Options) -> list:
    old_reason, new_reason = old.get("status") or "", new.get("status") or ""
    old_code, new_code = (old.get("code") or 1) if old_reason else 0, (new.get("code") or 1) if new_reason else 0
    if bool(old_reason) != bool(new_reason):
        if new_reason:
            return [("now unfit", "", "fits", f"code {new_code}: {new_reason}", _rule(decision))]
        return [("now fits", "", f"code {old_code}: {old_reason}", "fits", _rule_in(old_reason))]
    if old_code != new_code:
        return [("code", "", f"code {old_code}: {old_reason}", f"code {new_code}: {new_reason}", _rule(decision))]
    if old_reason != new_reason:
        return [("reason", "", old_reason, new_reason, _rule(decision))]
    return []


def _rule_in(reason: str) -> str:
    """The rule named at the start of a reason (``name (file:line): ...`` or ``name: ...``)."""
    head = reason.split(":", 1)[0]
    return head.split(" (", 1)[0].strip()


def _prioritize(old: dict, new: dict, decision, options: Options) -> list:
    old_scores, new_scores = old.get("nodeScore") or {}, new.get("nodeScore") or {}
    changes = []
    old_top, new_top = _top(old_scores), _top(new_scores)
    if old_top != new_top:
        changes.append(("top node", "", _top_text(old_top, old_scores), _top_text(new_top, new_scores), ""))
    for node in sorted(set(old_scores) | set(new_scores)):
        was, now = old_scores.get(node, 0.0), new_scores.get(node, 0.0)
        if abs(now - was) >= options.score_threshold:
            changes.append(("score", node, _number(was), _number(now), _movers(decision, node)))
    return changes


def _top(scores: dict) -> tuple[str, ...]:
    if not scores:
        return ()
    best = max(scores.values())
    return tuple(sorted(node for node, score in scores.items() if score == best))


def _top_text(top: tuple[str, ...], scores: dict) -> str:
    return f"{', '.join(top)} ({_number(scores[top[0]])})" if top else "(none)"


def _number(value: float) -> str:
    return f"{value:g}"


def _movers(decision, node: str) -> str:
    """The score rules contributing to ``node`` now."""
    try:
        per_rule = getattr(decision(), "per_rule", {}) or {}
    except Exception:
        return ""
    return ", ".join(f"{rule} {_number(scores.get(node, 0.0))}" for rule, scores in per_rule.items())


def _victims(old: dict, new: dict, decision, options: Options) -> list:
    changes = []
    if old.get("status") != new.get("status"):
        changes.append(("status", "", _word(old.get("status")), _word(new.get("status")), ""))
    was, now = _victim_names(old), _victim_names(new)
    if was != now:
        added, removed = sorted(set(now) - set(was)), sorted(set(was) - set(now))
        text = "; ".join(filter(None, [f"+{', '.join(added)}" if added else "",
                                       f"-{', '.join(removed)}" if removed else ""]))
        changes.append(("victims", "", ", ".join(sorted(was.values())) or "(none)", text, ""))
    return changes


def _victim_names(answer: dict) -> dict[str, str]:
    return {v.get("UID") or _name(v): _name(v) for v in answer.get("victims") or [] if isinstance(v, dict)}


def _word(status) -> str:
    return {1: "permit", 0: "abstain", -1: "reject"}.get(status, str(status))


def _flip(key: str, kind: str, show: Callable[[Any], str]) -> Callable:
    def compare_key(old: dict, new: dict, decision, options: Options) -> list:
        if old.get(key) == new.get(key):
            return []
        return [(kind, "", show(old.get(key)), show(new.get(key)), _rule(decision))]
    return compare_key


#: answer shape (``decide.table.Verb.answer``) -> its comparison; a vote is compared in ``compare``.
COMPARERS: dict[str, Callable] = {"fit": _predicate, "scores": _prioritize, "victims": _victims}


# ---------------------------------------------------------------------------------------------
# kube-scheduler's answers (wire/kube_encode.py): many nodes per call


def _node_states(answer: Any) -> dict[str, str]:
    """A filter answer as node -> "fits" / "reason" / "unresolvable: reason" (``Error`` under "")."""
    if not isinstance(answer, dict):
        return {}
    states = {item.get("metadata", {}).get("name", "?"): "fits"
              for item in ((answer.get("Nodes") or {}).get("items") or []) if isinstance(item, dict)}
    states.update((answer.get("FailedNodes") or {}).items())
    states.update((n, f"unresolvable: {r}") for n, r in (answer.get("FailedAndUnresolvableNodes") or {}).items())
    if answer.get("Error"):
        states[""] = f"Error: {answer['Error']}"
    return states


def _kube_filter(old: Any, new: Any, decision, options: Options) -> list:
    was, now = _node_states(old), _node_states(new)
    changes = []
    for node in sorted(set(was) | set(now)):
        before, after = was.get(node, "(not answered)"), now.get(node, "(not answered)")
        if before == after:
            continue
        kind = "now fits" if after == "fits" else "now unfit" if before == "fits" else "reason"
        changes.append((kind, node, before, after, _node_rule(decision, node) if after != "fits"
                        else _rule_in(before.removeprefix("unresolvable: "))))
    return changes


def _node_rule(decision: Callable[[], Any], node: str) -> str:
    try:
        found = decision()
    except Exception as error:
        return f"(decision unavailable: {error})"
    for name, each in zip(getattr(found, "nodes", ()), getattr(found, "decisions", ())):
        if name == node:
            return each.rule or ""
    return ""


def _kube_prioritize(old: Any, new: Any, decision, options: Options) -> list:
    """Scores 0..10: a move is reported from ``score_threshold`` on kube-scheduler's node-score
    scale (x10, ``MaxNodeScore / MaxExtenderPriority``)."""
    def scores(answer: Any) -> dict:
        return {p.get("Host"): p.get("Score", 0) for p in answer or [] if isinstance(p, dict)} \
            if isinstance(answer, list) else {}
    old_scores, new_scores = scores(old), scores(new)
    changes = []
    old_top, new_top = _top(old_scores), _top(new_scores)
    if old_top != new_top:
        changes.append(("top node", "", _top_text(old_top, old_scores), _top_text(new_top, new_scores), ""))
    for node in sorted(set(old_scores) | set(new_scores)):
        was, now = old_scores.get(node, 0), new_scores.get(node, 0)
        if abs(now - was) * 10 >= options.score_threshold:
            changes.append(("score", node, _number(was), _number(now), _movers(decision, node)))
    return changes


def _kube_victims(old: Any, new: Any, decision, options: Options) -> list:
    def per_node(answer: Any) -> dict[str, list[str]]:
        found = (answer or {}).get("NodeNameToMetaVictims") if isinstance(answer, dict) else None
        return {node: sorted(p.get("UID", "?") for p in (v or {}).get("Pods") or [] if isinstance(p, dict))
                for node, v in (found or {}).items()}
    was, now = per_node(old), per_node(new)
    return [("victims", node, ", ".join(was.get(node, [])) or "(node left out)",
             ", ".join(now.get(node, [])) or "(node left out)", "")
            for node in sorted(set(was) | set(now)) if was.get(node) != now.get(node)]


#: kube-scheduler's answer shapes (``kube_table``'s ``Verb.answer``) -> their comparison
KUBE_COMPARERS: dict[str, Callable] = {"fit": _kube_filter, "scores": _kube_prioritize, "victims": _kube_victims}
