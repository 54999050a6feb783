"""PolicySet: a compiled set of policy files and its decisions, one method per deciding verb.

Built by ``policyset.compile_sources`` from a ``lang.Program`` and the set's version; immutable
and shared by threads. Evaluation raises only ``EvalError``. Which rule kinds decide which verb
comes from the verb table. A set decides for one scheduler (``protocol``): only the rules whose
file serves it (the ``protocol`` statement) decide; ``for_protocol`` gives the same set deciding
for another scheduler.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Sequence

from policy_extender.decide.decisions import (FITS, BoolDecision, FilterDecision, Rule, ScoreDecision,
                                              StatusDecision, VictimDecision)
from policy_extender.decide.reply import Reply
from policy_extender.decide.rules import SKIPPED, normalized, score, why, why_not
from policy_extender.decide.table import VERBS, VERBS_OF_RULE_KIND
from policy_extender.errors import EvalError
from policy_extender.lang import Program
from policy_extender.lang.budget import current as current_budget
from policy_extender.lang.compiler import CompiledRule
from policy_extender.lang.runtime import Context
from policy_extender.wire import encode
from policy_extender.wire.paths import go_reads


class PolicySet:
    """A compiled, immutable policy set; safe to share between threads."""

    def __init__(self, sources: dict[str, str], program: Program, version: str,
                 protocol: str = "volcano") -> None:
        checked, every_rule = program.checked, program.rules
        self._program = program
        #: each rule's estimated cost per call (``lang.cost``), in rule order: what ``check --cost`` shows
        self.costs = tuple(getattr(program, "costs", ()))
        self.sources = dict(sources)
        self.version = version
        #: the scheduler this set decides for; ``rules`` lists every rule, whatever it serves
        self.protocol = protocol
        self._for_protocol: dict[str, PolicySet] = {protocol: self}
        rules = [r for r in every_rule if protocol in r.protocols]
        #: root object type -> the wire paths its pruned decoders keep
        self.reads = go_reads(checked.reads)
        #: verb kinds whose rules read session data (snapshot jobs and queues, session counts)
        self.session_verbs = frozenset(v for kind in checked.session_kinds for v in VERBS_OF_RULE_KIND[kind])
        self.rules = [Rule(r.name, r.kind, r.file, r.line, r.column, r.audit, r.protocols) for r in every_rule]
        #: the kinds of the rules that decide for ``protocol``
        self.kinds = frozenset(r.kind for r in rules)
        #: the aggregate slots a rule context holds (``Context``'s list; audit.py builds its own)
        self.slots = len(checked.slots)
        #: the set loads, but these are worth saying (``check`` shows them): an unused let
        self.warnings = tuple(checked.warnings)
        self._by_kind = {kind: [r for r in rules if r.kind == kind and not r.audit] for kind in self.kinds}
        self._filters = self._by_kind.get("filter", [])  # every predicate call's rules, looked up once
        #: filter rule name -> (its rejection, the answer to Volcano) for a rule whose reason has
        #: no {expression}: both the same on every call the rule rejects, so built once here
        #: (``predicate`` gives the decision, ``decide.handlers.decide_predicate`` the answer)
        self.rejections: dict[str, tuple[FilterDecision, Reply]] = {
            r.name: _constant_rejection(r) for r in self._filters if r.constant_reason is not None}
        #: shadow rules by kind (decide/audit.py evaluates them); empty without any
        self.audited = {kind: [r for r in rules if r.kind == kind and r.audit]
                        for kind in self.kinds if any(r.kind == kind and r.audit for r in rules)}

    @property
    def checked(self) -> Any:
        """The checked program (``lang.checker.Checked``): rules with their guards, and what each name is."""
        return self._program.checked

    def __repr__(self) -> str:
        return f"PolicySet(version={self.version}, files={sorted(self.sources)}, rules={len(self.rules)})"

    def for_protocol(self, protocol: str) -> PolicySet:
        """The same set deciding for ``protocol`` (``volcano``, ``kube-scheduler``): the rules of the
        files that serve it; built once per set and kept."""
        kept = self._for_protocol.get(protocol)
        if kept is None:
            kept = self._for_protocol[protocol] = PolicySet(self.sources, self._program, self.version, protocol)
            kept._for_protocol = self._for_protocol
        return kept

    def alone(self, name: str) -> PolicySet:
        """The same set with the rule ``name`` deciding alone (enforced, even when it is an audit
        rule): what ``check --scale`` times rule by rule. KeyError when the set has no such rule."""
        rule = next((r for r in self._program.rules if r.name == name), None)
        if rule is None:
            raise KeyError(name)
        alone = self._program._replace(rules=[dataclasses.replace(rule, audit=False)])
        return PolicySet(self.sources, alone, self.version, self.protocol)

    def _rules(self, *kinds: str) -> list[CompiledRule]:
        return [r for kind in kinds for r in self._by_kind.get(kind, ())] if len(kinds) > 1 \
            else self._by_kind.get(kinds[0], [])

    # --- decisions -------------------------------------------------------------------------------

    def predicate(self, task: object, node: object, env: object) -> FilterDecision:
        rules = self._filters
        if not rules:
            return FITS
        slots = self.slots  # no aggregate: no slot to write, so one empty tuple, not a new list
        c = Context(env, [None] * slots if slots else (), task=task, node=node)  # type: ignore[arg-type]  # () holds no slot
        rule = None
        try:  # rule.evaluate, once around the loop: the hot path of every predicate call
            for rule in rules:
                if rule.applies is not None and not rule.applies(c):
                    continue
                if rule.test(c) is not True:
                    break
            else:
                return FITS
        except EvalError as err:
            err.rule = err.rule or rule.name  # type: ignore[union-attr]  # set before a rule can raise
            raise
        constant = self.rejections.get(rule.name)
        if constant is not None:
            return constant[0]
        return FilterDecision(False, 3 if rule.unresolvable else 2, why_not(rule, c), rule.name)

    def prioritize(self, task: object, nodes: Sequence[Any], env: object) -> ScoreDecision:
        names = [n.name for n in nodes]
        scores = dict.fromkeys(names, 0.0)
        per_rule: dict[str, dict[str, float]] = {}
        slots, shared = self.slots, current_budget()  # one budget for the call, not one per node (lang/budget.py)
        contexts = [Context(env, [None] * slots if slots else (), task=task, node=n, budget=shared) for n in nodes]  # type: ignore[arg-type]  # as above
        for rule in self._rules("score"):
            raw = [score(rule, c) for c in contexts]
            if all(v is SKIPPED for v in raw):
                continue
            values = normalized(raw, rule.normalize)
            contributions = {name: v * rule.weight for name, v in zip(names, values)}
            per_rule[rule.name] = contributions
            for name, v in contributions.items():
                scores[name] += v
        return ScoreDecision(scores, per_rule)

    def victims(self, kind: str, evictor: object, evictees: Sequence[object], env: object) -> VictimDecision:
        """Permit (1) with the evictees every applicable rule passes; Abstain (0) when no rule
        applies to any evictee. When rules applied and refused every evictee ("no evictee
        qualifies"), the answer is Permit with no victims (Volcano ends the tier there with no
        victims), unless every rule that refused one is marked ``if none abstain``: then Abstain
        (Volcano skips the extender and the tier's other plugins decide)."""
        rules = self._rules(*VERBS[kind].rule_kinds)
        victims: list = []
        reasons, applied = {}, False
        vetoed = False  # a rule without `if none abstain` refused some evictee
        shared = current_budget()  # one budget for the call, not one per evictee
        for i, evictee in enumerate(evictees):
            c = Context(env, [None] * self.slots, evictor=evictor, evictee=evictee, budget=shared)
            failed = None
            for rule in rules:
                if failed is not None and (rule.abstain_if_none or victims):
                    continue  # only a vetoing refusal can still change the answer
                if rule.applies is not None and not rule.evaluate(rule.applies, c):
                    continue
                applied = True
                if rule.evaluate(rule.test, c) is not True:
                    failed = failed or rule
                    if not rule.abstain_if_none:
                        vetoed = True
                        break
            if failed is None:
                victims.append(i)
            else:
                reasons[i] = why_not(failed, c)
        if not applied:
            return VictimDecision(0)
        if not victims and not vetoed:
            return VictimDecision(0, [], reasons)
        return VictimDecision(1, victims, reasons)

    def enqueueable(self, job: object, env: object) -> StatusDecision:
        c = Context(env, [None] * self.slots, _job=job)
        permit = None
        for rule in self._rules("enqueue"):
            if rule.applies is not None and not rule.evaluate(rule.applies, c):
                continue
            passed = rule.evaluate(rule.test, c) is True
            if rule.permit:
                # a permit rule only ever votes Permit (true) or abstains (false/null)
                if passed and permit is None:
                    permit = rule
            elif not passed:
                return StatusDecision(-1, rule.name, why_not(rule, c))
        if permit is not None:
            return StatusDecision(1, permit.name, why(permit, c))
        return StatusDecision(0)

    def overused(self, queue: object, env: object) -> BoolDecision:
        c = Context(env, [None] * self.slots, _queue=queue)
        for rule in self._rules("overused"):
            if rule.applies is not None and not rule.evaluate(rule.applies, c):
                continue
            if rule.evaluate(rule.test, c) is True:
                return BoolDecision(True, rule.name, why(rule, c))
        return BoolDecision(False)

    def ready(self, job: object, env: object) -> BoolDecision:
        c = Context(env, [None] * self.slots, _job=job)
        for rule in self._rules("ready"):
            if rule.applies is not None and not rule.evaluate(rule.applies, c):
                continue
            if rule.evaluate(rule.test, c) is not True:
                return BoolDecision(False, rule.name, why_not(rule, c))
        return BoolDecision(True)


def _constant_rejection(rule: CompiledRule) -> tuple[FilterDecision, Reply]:
    """The rejection of a filter rule whose reason is constant, and its Volcano answer: what
    ``predicate`` and the predicate handler would build on each call it rejects."""
    decision = FilterDecision(False, 3 if rule.unresolvable else 2, rule.prefix + rule.constant_reason, rule.name)  # type: ignore[operator]  # a constant reason's rule
    return decision, Reply(encode.predicate(decision), decision="reject", rule=rule.name)
