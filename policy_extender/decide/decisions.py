"""What a policy set decides, one small immutable record per kind of answer, and its rules.

The wire encoders (``wire/encode.py``) read these attributes; docs/architecture.md lists them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import msgspec

from policy_extender.schema import DEFAULT_PROTOCOLS


@dataclass(frozen=True)
class Rule:
    name: str
    kind: str
    file: str
    line: int
    column: int
    audit: bool = False  # a shadow rule: evaluated and counted (decide/audit.py), never decides
    protocols: frozenset[str] = DEFAULT_PROTOCOLS  # the schedulers it serves (its file's ``protocol``)


class FilterDecision(msgspec.Struct, frozen=True, gc=False):
    """A predicate's answer (a frozen msgspec Struct, built in C, not a frozen dataclass like the
    others: one is built for every rejecting predicate call, and a frozen dataclass sets each
    field through ``object.__setattr__``)."""

    fits: bool
    code: int = 0            # 0 fits, 2 Unschedulable, 3 UnschedulableAndUnresolvable
    reason: str = ""
    rule: str | None = None


@dataclass(frozen=True)
class ScoreDecision:
    scores: dict[str, float]                  # node name -> summed weighted score
    per_rule: dict[str, dict[str, float]] = field(default_factory=dict)  # rule -> node -> contribution


@dataclass(frozen=True)
class VictimDecision:
    status: int                               # 1 Permit, 0 Abstain (no rule applied, or `if none abstain`)
    victims: list[int] = field(default_factory=list)       # indexes into the evictees
    reasons: dict[int, str] = field(default_factory=dict)  # evictee index -> why it is protected


@dataclass(frozen=True)
class StatusDecision:
    status: int                               # 1 Permit, 0 Abstain, -1 Reject
    rule: str | None = None
    reason: str = ""


@dataclass(frozen=True)
class BoolDecision:
    value: bool
    rule: str | None = None
    reason: str = ""


FITS = FilterDecision(True)


@dataclass(frozen=True)
class NodesFilterDecision:
    """A filter of many nodes in one call (kube-scheduler's): one predicate answer per node."""

    nodes: list[str]                          # the nodes' names, in the order sent
    decisions: list[FilterDecision]           # each node's answer

    @property
    def kept(self) -> list[str]:
        return [n for n, d in zip(self.nodes, self.decisions) if d.fits]

    @property
    def failed(self) -> dict[str, str]:
        """Rejected nodes -> reason (a rule without ``unresolvable``: preemption may help)."""
        return {n: d.reason for n, d in zip(self.nodes, self.decisions) if not d.fits and d.code != 3}

    @property
    def unresolvable(self) -> dict[str, str]:
        """Nodes rejected by an ``unresolvable`` rule -> reason."""
        return {n: d.reason for n, d in zip(self.nodes, self.decisions) if not d.fits and d.code == 3}

    @property
    def counts(self) -> dict[tuple[str, str], int]:
        """(rule, outcome) -> nodes: the rejections, counted by rule in the metrics."""
        found: dict[tuple[str, str], int] = {}
        for d in self.decisions:
            if not d.fits:
                key = (d.rule or "", "reject")
                found[key] = found.get(key, 0) + 1
        return found


@dataclass(frozen=True)
class PerNodeVictimDecision:
    """Victims asked for many nodes in one call (kube-scheduler's preempt): one answer per node."""

    per_node: list[VictimDecision]


#: What a verb's ``decide`` returns (``table.Verb``, ``kube_table``).
Decision = (FilterDecision | ScoreDecision | VictimDecision | StatusDecision | BoolDecision | NodesFilterDecision
            | PerNodeVictimDecision)
