"""What a policy set needs Volcano to call: the verbs its rules serve, and the extended resources
every task-scoped rule is guarded by (``extender.managedResources``). ``volcano-conf --policies``
derives the extender's arguments from these (``commands/volcano_conf.derived_extender``) and
``serve`` reports the rules whose verb Volcano never calls (``decide.unserved``).

Each verb Volcano registers costs it a full serialisation per call (a predicate verb with no filter
rule marshals the task and a node with all its pods for every task and node, for an answer of
"fits"), so a verb no rule serves is pure cost. The session verbs (``onSessionOpen``,
``onSessionClose``, ``jobEnqueued``, ``allocateFunc``, ``deallocateFunc``) are kept with any deciding
verb: they pin a cycle to one policy version and carry the snapshot and this cycle's events that
``session``, ``cluster`` and the session counts read.

``managedResources`` makes Volcano skip every task-scoped call (predicate, prioritize,
preemptable/reclaimable for the evictor, allocateFunc/deallocateFunc) of a task that requests
none of the resources (``extender.go``, ``IsInterested``). That is the same answer only when each
filter, score and victim rule applies to such tasks alone: its file guard or ``when`` holds a
conjunct ``task.requests.gpu > 0`` (``>= 1``, ``!= 0``, ``task.requests["example.com/fpga"] > 0``;
``evictor.`` for victim rules), and only when no rule reads ``session`` or ``cluster``, which the
skipped allocateFunc events of the other tasks would leave wrong.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Iterator, NamedTuple

from policy_extender import schema
from policy_extender.decide.table import VERBS, VERBS_OF_RULE_KIND
from policy_extender.lang import ast
from policy_extender.verb_names import volcano as names

#: Verbs kept with any deciding verb (see the module docstring).
SESSION_VERBS = (names.ON_SESSION_OPEN, names.ON_SESSION_CLOSE, names.JOB_ENQUEUED, names.ALLOCATE,
                 names.DEALLOCATE)
#: Rule kinds whose verbs Volcano calls per task (``IsInterested``), and the root naming that task.
TASK_SCOPED = {"filter": "task", "score": "task", "victim": "evictor", "preemptable": "evictor",
               "reclaimable": "evictor"}
#: Roots whose values follow this cycle's allocateFunc/deallocateFunc events.
EVENT_ROOTS = frozenset({"session", "cluster"})


class Served(NamedTuple):
    verbs: tuple[str, ...]                # in Volcano's order (names.VERB_KINDS)
    kinds_by_verb: dict[str, frozenset]   # deciding verb -> the rule kinds of the set it serves
    managed: tuple[str, ...]              # managedResources; () when any rule needs every task
    why_not_managed: str                  # why ``managed`` is empty, in a user's words


def served(policy_set: Any) -> Served:
    """The Volcano verbs the rules of ``policy_set`` (the ones serving Volcano) need, and the
    managed resources that send them only the tasks their rules apply to."""
    volcano = policy_set.for_protocol("volcano")
    kinds = volcano.kinds
    deciding = {verb: frozenset(k for k in kinds if verb in VERBS_OF_RULE_KIND.get(k, ()))
                for verb in VERBS if VERBS[verb].decide is not None}
    deciding = {verb: ks for verb, ks in deciding.items() if ks}
    verbs = tuple(v for v in names.VERB_KINDS if v in deciding or (deciding and v in SESSION_VERBS))
    managed, why = managed_resources(policy_set)
    return Served(verbs, deciding, managed, why)


def managed_resources(policy_set: Any) -> tuple[tuple[str, ...], str]:
    """(the extended resources whose request guards every task-scoped rule, why not: "")."""
    checked = policy_set.checked
    rules = [r for r in checked.rules if "volcano" in r.protocols]
    read = {root for r in rules for root in _roots(r, checked.names)}
    if read & EVENT_ROOTS:
        return (), (f"a rule reads {' and '.join(sorted(read & EVENT_ROOTS))}, which follow{'s' * (len(read & EVENT_ROOTS) == 1)} every task's "
                    "allocateFunc: with managedResources Volcano would not send those of the other tasks")
    found: set[str] = set()
    for rule in rules:
        if rule.kind not in TASK_SCOPED:
            continue
        guarded = {res for g in rule.guards for res in _requested(g, TASK_SCOPED[rule.kind], checked.names)}
        if not guarded:
            return (), (f"{rule.kind} rule {rule.name} ({rule.file}) applies to tasks that request no "
                        f"extended resource (no `when {TASK_SCOPED[rule.kind]}.requests.gpu > 0` or the like)")
        found |= guarded
    if not found:
        return (), "no filter, score or victim rule"
    return tuple(sorted(found)), ""


def _children(node: Any) -> Iterator[Any]:
    if isinstance(node, (list, tuple)):
        for item in node:
            yield from _children(item)
    elif dataclasses.is_dataclass(node) and not isinstance(node, type):
        for f in dataclasses.fields(node):
            value = getattr(node, f.name)
            if isinstance(value, (list, tuple)) or dataclasses.is_dataclass(value):
                yield value


def _roots(rule: Any, names_of: Any, seen: set[int] | None = None) -> set[str]:
    """The context roots a rule reads, through its guards, lets, params and shorthands."""
    seen = seen if seen is not None else set()
    found: set[str] = set()
    stack = [rule.rule, *rule.guards]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, ast.Name):
            kind, *rest = names_of.get(id(node), ("",))
            if kind == "root":
                found.add(rest[0])
            elif kind == "let":
                stack.append(rest[0].expr)
            elif kind == "short":
                stack.append(rest[0])
        stack.extend(_children(node))
    return found


def _requested(guard: Any, root: str, names_of: Any) -> set[str]:
    """The extended resources a guard requires ``root`` (task or evictor) to request: one per
    conjunct ``root.requests.R > 0`` (``>= n`` with n >= 1, ``!= 0``), lets followed."""
    if isinstance(guard, ast.Name) and names_of.get(id(guard), ("",))[0] == "let":
        return _requested(names_of[id(guard)][1].expr, root, names_of)
    if isinstance(guard, ast.Binary) and guard.op == "and":
        return _requested(guard.left, root, names_of) | _requested(guard.right, root, names_of)
    if not isinstance(guard, ast.Binary):
        return set()
    resource = _request_of(guard.left, root, names_of)
    right = guard.right
    while isinstance(right, ast.Name) and names_of.get(id(right), ("",))[0] == "let":  # a param, a let of a number
        right = names_of[id(right)][1].expr
    bound = right.value if isinstance(right, ast.Literal) else None
    if resource is None or isinstance(bound, bool) or not isinstance(bound, (int, float)):
        return set()
    if (guard.op == ">" and bound >= 0) or (guard.op == ">=" and bound > 0) or (guard.op == "!=" and bound == 0):
        return {resource}
    return set()


def _request_of(node: Any, root: str, names_of: Any) -> str | None:
    """The full name of the extended resource ``root.requests.R`` reads, or None."""
    if isinstance(node, ast.FieldAccess):
        key, owner = schema.RESOURCE_SHORTHANDS.get(node.name, ""), node.obj
    elif isinstance(node, ast.Index) and isinstance(node.key, ast.Literal) and isinstance(node.key.value, str):
        key, owner = node.key.value, node.obj
    else:
        return None
    if not (isinstance(owner, ast.FieldAccess) and owner.name == "requests" and isinstance(owner.obj, ast.Name)
            and names_of.get(id(owner.obj), ("",))[:2] == ("root", root)):
        return None
    return key if "/" in key else None
