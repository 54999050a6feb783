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
