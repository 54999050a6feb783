"""kube-scheduler's verb table: its extender's filter, prioritize and preempt (``names``), each an
entry of the same ``table.Verb`` as Volcano's, deciding with the policy set's kube-scheduler rules
(``PolicySet.for_protocol``) and no session. The handlers (``handlers.HANDLERS``), the step after
a decision, the tally and ``/why``, and the fixture runner take these entries as they take
Volcano's; ``tests/decide/test_verb_table.py`` holds both tables to the same parts.

How the rules map onto kube-scheduler's answers (docs/kube-scheduler.md):

* filter: each node through the set's ``predicate``; a node that fits is kept, a rejected one
  goes to ``FailedNodes`` with the rule's reason, or to ``FailedAndUnresolvableNodes`` when the
  rule is ``unresolvable`` (preemption will not help);
* prioritize: each node's total score (the weighted rule values summed, as Volcano's prioritize)
  clamped to 0..10 (kube-scheduler's ``MaxExtenderPriority``) and rounded half up (2.5 -> 3); a
  policy spreads its values over the range with ``normalize 0 to 10``;
* preempt: per node, the set's ``victims(preemptable, evictor=the pod, evictees=that node's
  victims)``: Permit -> those victims; Abstain (no rule applied) -> every victim kube-scheduler
  proposed; a node with none left is left out of the answer.

An entry's ``inputs``, ``compact`` and ``expect`` are what a ``protocol: kube-scheduler`` fixture
case gives and may expect (``fixture_runner/kube.py`` reads them): a filter case is one ``node``,
as Volcano's, and may also expect ``unresolvable`` and, for a raw body of several nodes, ``nodes``;
a preempt case expects its ``victims`` (kube-scheduler's answer has no status).
"""

from __future__ import annotations

import math
from typing import Any

from policy_extender.decide import audit
from policy_extender.decide.decisions import NodesFilterDecision, PerNodeVictimDecision, ScoreDecision
from policy_extender.decide.table import SESSION_NONE, Verb
from policy_extender.decide.tally_shapes import NodesFilterShape, PerNodeVictimsShape, ScoreShape, shapes_of
from policy_extender.verb_names import kube_scheduler as names
from policy_extender.verb_names.volcano import PREEMPTABLE
from policy_extender.wire import compact, kube, kube_encode

PROTOCOL = names.PROTOCOL

#: the rule kinds of kube-scheduler's preempt: those of Volcano's preemptable verb
_VICTIM_KINDS = ("victim", "preemptable")


def kube_score(total: float) -> int:
    """A node's summed score as kube-scheduler takes it: clamped to 0..10, rounded half up."""
    if math.isnan(total):
        return 0
    return int(math.floor(min(max(total, 0.0), float(kube_encode.MAX_SCORE)) + 0.5))


def filter_nodes(policy_set: Any, request: kube.KubeFilterRequest, env: Any) -> NodesFilterDecision:
    pod = request.task
    return NodesFilterDecision([n.name for n in request.nodes],
                               [policy_set.predicate(pod, node, env) for node in request.nodes])


def prioritize_nodes(policy_set: Any, request: kube.KubeFilterRequest, env: Any) -> ScoreDecision:
    """Every node sent, scored 0..10 in the order sent; ``per_rule`` keeps each rule's weighted values."""
    decided = policy_set.prioritize(request.task, request.nodes, env)
    return ScoreDecision({n.name: kube_score(decided.scores.get(n.name, 0.0)) for n in request.nodes},
                         decided.per_rule)


def preempt_nodes(policy_set: Any, request: kube.KubePreemptRequest, env: Any) -> PerNodeVictimDecision:
    return PerNodeVictimDecision([policy_set.victims(PREEMPTABLE, request.evictor, node.pods, env)
                                  for node in request.nodes])


def preemption_answer(decision: PerNodeVictimDecision, request: kube.KubePreemptRequest) -> bytes:
    """Permit: the victims the rules allow; Abstain: every victim proposed; none left: no entry."""
    out = {}
    for node, answer in zip(request.nodes, decision.per_node):
        uids = [node.uids[i] for i in answer.victims] if answer.status else list(node.uids)
        out[node.node] = (uids, node.pdb_violations)
    return kube_encode.preemption_result(out)


def _preempt_outcome(decision: PerNodeVictimDecision) -> str:
    """``evict`` when some node keeps victims the rules chose, ``reject`` when rules left none on
    any node, nothing when no rule applied anywhere."""
    permits = [d for d in decision.per_node if d.status]
    if any(d.victims for d in permits):
        return "evict"
    return "reject" if permits else ""


def _audit_filter(policy_set: Any, request: kube.KubeFilterRequest, env: Any) -> list:
    return [a for node in request.nodes for a in audit.predicate(policy_set, request.task, node, env)]


def _audit_preempt(policy_set: Any, request: kube.KubePreemptRequest, env: Any) -> list:
    return [a for node in request.nodes
            for a in audit.victims(policy_set, _VICTIM_KINDS, request.evictor, node.pods, env)]


KUBE_VERBS: dict[str, Verb] = {v.name: v for v in (
    Verb(names.FILTER, kube.decode_extender_args, decide=filter_nodes,
         encode=lambda d, r: kube_encode.filter_result(d.kept, d.failed, d.unresolvable, r.sent),
         outcome=lambda d: "", audit=_audit_filter, tally=NodesFilterShape(names.FILTER, "kf"),
         decision="filter", rule_kinds=("filter",), inputs=("task", "node"), compact=compact.kube_filter_body,
         expect=frozenset({"fits", "unresolvable", "reason", "rule", "nodes"}), answer="fit",
         protocol=PROTOCOL, session=SESSION_NONE, error_in_answer=kube_encode.filter_error, error_body=kube_encode.error),
    Verb(names.PRIORITIZE, kube.decode_extender_args, decide=prioritize_nodes,
         encode=lambda d, r: kube_encode.host_priorities(d.scores),
         audit=lambda ps, r, env: audit.prioritize(ps, r.task, r.nodes, env), tally=ScoreShape(names.PRIORITIZE, "ks"),
         decision="score", rule_kinds=("score",), inputs=("task", "nodes"), compact=compact.extender_args_body,
         expect=frozenset({"scores", "order"}), answer="scores",
         protocol=PROTOCOL, session=SESSION_NONE, error_body=kube_encode.error),
    Verb(names.PREEMPT, kube.decode_preemption_args, decide=preempt_nodes, encode=preemption_answer,
         outcome=_preempt_outcome, audit=_audit_preempt, tally=PerNodeVictimsShape(names.PREEMPT, "kv", "ke"),
         decision="preemptable", rule_kinds=_VICTIM_KINDS, inputs=("evictor", "evictees"),
         compact=compact.preemption_args_body, expect=frozenset({"victims"}), answer="victims",
         protocol=PROTOCOL, session=SESSION_NONE, error_body=kube_encode.error),
)}

VERB_KINDS = names.VERB_KINDS
assert tuple(KUBE_VERBS) == VERB_KINDS, "the table lists every verb kind once, in names.VERB_KINDS order"

#: The verbs whose answer is a decision of the policies (all three).
DECIDING: tuple[str, ...] = tuple(name for name, verb in KUBE_VERBS.items() if verb.decide is not None)

#: The tally's shapes of the deciding verbs (``/why``'s sections about kube-scheduler's calls).
SHAPES = shapes_of(KUBE_VERBS.values())

#: Decision name (``filter``, ``score``, ``preemptable``) -> its verb.
BY_DECISION: dict[str, Verb] = {verb.decision: verb for verb in KUBE_VERBS.values()}
