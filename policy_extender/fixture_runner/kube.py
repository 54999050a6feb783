"""kube-scheduler's cases (``protocol: kube-scheduler``): the decisions a case can name, the bodies
kube-scheduler sends built from the case's compact input, and its answers read in ``expect:`` terms.

A case gives its input as a Volcano case does (``task`` and ``node`` for filter, ``task`` and
``nodes`` for score, ``evictor`` and ``evictees`` for preemptable); ``wire.compact`` builds the
``ExtenderArgs`` or ``ExtenderPreemptionArgs`` kube-scheduler would send (``v1.Pod`` and ``v1.Node``
JSON), which goes through the service's kube-scheduler verbs (``decide.kube_table``), deciding with
the set's kube-scheduler rules and no session. What a case can expect is what kube-scheduler reads
off the answer:

* filter: ``fits`` (required: the node is in ``Nodes``), ``unresolvable`` (rejected into
  ``FailedAndUnresolvableNodes``, so preemption is not tried on it), ``reason`` (a regex searched in
  the reason, the map's value), ``rule`` (from the decision: not on the wire); for a raw body of
  several nodes, the same per node: ``nodes: {NAME: {fits: ..., ...}}``;
* score: ``scores`` (``{node: 0..10}``, the integers of the ``HostPriorityList``), ``order``;
* preemptable: ``victims``, the evictees whose UIDs the answer names on their node (by name or
  UID, any order): every evictee when no rule applied (kube-scheduler's own choice stands), none
  when the rules left none (the node is dropped from the answer).
"""

from __future__ import annotations

import json
from typing import Any

from policy_extender.decide.kube_table import BY_DECISION, KUBE_VERBS
from policy_extender.verb_names import kube_scheduler as names
from policy_extender.wire.kube import decode_preemption_args

from . import outcome
from .expect import NODE_KEYS
from .model import Decision

PROTOCOL = names.PROTOCOL

#: decision -> its case's decision: the compact inputs and what ``expect:`` may name are the table
#: entry's (``inputs``, ``expect``; ``audit`` as for Volcano's decisions)
DECISIONS: dict[str, Decision] = {
    name: Decision(name, verb.name, verb.inputs, verb.expect | {"audit"}, PROTOCOL) for name, verb in BY_DECISION.items()}
#: other names a kube-scheduler case may use for a decision: its verbs' names (their paths) and kinds
ALIASES: dict[str, str] = {
    **{names.CONFIG_NAMES[verb.name]: verb.decision for verb in KUBE_VERBS.values() if names.CONFIG_NAMES[verb.name] != verb.decision},
    **{verb.name: verb.decision for verb in KUBE_VERBS.values()}}


#: verb kind -> its decision
DECISIONS_BY_VERB: dict[str, str] = {verb.name: verb.decision for verb in KUBE_VERBS.values()}
#: the verbs' names, as kube-scheduler's configuration names them (``filterVerb``: ``filter``)
VERB_PATHS: tuple[str, ...] = tuple(names.CONFIG_NAMES[verb] for verb in KUBE_VERBS)


#: decision -> the ``wire.compact`` builder of its body and the inputs it takes (the table entry's)
BODIES = {name: (verb.compact, verb.inputs) for name, verb in BY_DECISION.items()}


class KubeAnswerError(Exception):
    """kube-scheduler's answer says the call failed (its ``Error``), or it cannot say what the
    case's ``expect:`` asks (``key``: the expectation)."""

    def __init__(self, message: str, key: str | None = None):
        super().__init__(message)
        self.key = key


def actual(decision_name: str, decision, response: Any, body: bytes, expect=()) -> dict:
    """The answer in ``expect:`` terms (``expect``: the case's, for what a filter of several nodes
    cannot say)."""
    if decision_name == "filter":
        return _filter(decision, response, expect)
    if decision_name == "score":
        scores = {entry["Host"]: entry["Score"] for entry in response or ()}
        return {"scores": scores, "order": sorted(scores, key=lambda name: (-scores[name], name))}
    return _victims(response, body)


def _filter(decision, response: dict, expect) -> dict:
    """Per node (``nodes``) what the answer says of it, and of the one node of a one-node call."""
    if response.get("Error"):
        raise KubeAnswerError(f"the filter answer carries Error: {response['Error']}")
    kept = {item.get("metadata", {}).get("name") for item in (response.get("Nodes") or {}).get("items") or ()}
    failed, unresolvable = response.get("FailedNodes") or {}, response.get("FailedAndUnresolvableNodes") or {}
    nodes = {name: {"fits": name in kept, "unresolvable": name in unresolvable,
                    "reason": failed.get(name) or unresolvable.get(name) or "", "rule": None if each.fits else each.rule}
             for name, each in zip(decision.nodes, decision.decisions)}
    if len(nodes) == 1:
        return {**next(iter(nodes.values())), "nodes": nodes}
    said = sorted(NODE_KEYS & set(expect))  # what a case says of its one node, ``nodes:`` of each
    if said:
        raise KubeAnswerError(f"this filter call sends {len(nodes)} nodes, so `{'`, `'.join(said)}` cannot say which: "
                              "expect per node, `nodes: {NAME: {fits: false, unresolvable: true}, ...}`", said[0])
    return {"nodes": nodes}


def _victims(response: dict, body: bytes) -> dict:
    """The victims named by UID in the answer, as the evictees' names, and ``victim_uids`` (UID ->
    name) so an expectation may name them either way."""
    names_of = {}
    for victims in (json.loads(body).get("NodeNameToVictims") or {}).values():
        for pod in (victims or {}).get("Pods") or ():
            metadata = pod.get("metadata") or {}
            names_of[metadata.get("uid")] = metadata.get("name")
    uids = [pod.get("UID") for meta in (response.get("NodeNameToMetaVictims") or {}).values()
            for pod in (meta or {}).get("Pods") or ()]
    return {"victims": sorted(names_of.get(uid) or uid for uid in uids), "victim_uids": {u: names_of.get(u) for u in uids}}


def per_node(decision_name: str, decision) -> list:
    """A kube-scheduler decision as the one-node decisions Volcano's verbs give (a predicate per
    node, victims per node), for coverage and explanations."""
    if decision_name == "filter":
        return list(decision.decisions)
    if decision_name == "preemptable":
        return list(decision.per_node)
    return [decision]


def explanation(policy_set, decision_name: str, decision, body: bytes) -> str:
    """Why, node by node as Volcano's decisions are explained; a preempt's victims by name, per node."""
    if decision_name != "preemptable":
        return "\n".join(outcome.explanation(policy_set, each) for each in per_node(decision_name, decision))
    lines = []
    for node, answer in zip(decode_preemption_args(body).nodes, decision.per_node):
        if answer.status != 1 and not answer.reasons:
            why = "abstain: no victim rule applied to any evictee: kube-scheduler's victims stand"
        else:
            why = outcome.explanation(policy_set, answer, {"victims": [{"Name": node.pods[i].name} for i in answer.victims]})
            if answer.status == 1 and not answer.victims:  # Volcano's words for it do not apply
                why = "\n".join(line for line in why.splitlines() if not line.startswith("no evictee qualifies"))
                why += "\nno evictee qualifies: the node is left out of the answer (no preemption there)"
        lines.append(f"node {node.node}: " + why.replace("\n", "\n  "))
    return "\n".join(lines)
