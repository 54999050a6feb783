"""One compiled rule on one context, as both its enforced evaluation (``policy_set.py``) and its
audited one (``audit.py``) need it: a score rule's raw value and the normalization of a score
rule's values, and the text of a rule's reason.
"""

from __future__ import annotations

from typing import Any

from policy_extender.lang.compiler import CompiledRule
from policy_extender.lang.runtime import Context

#: A score rule's value for a node its ``when`` skips (contributes nothing).
SKIPPED = object()


def score(rule: CompiledRule, c: Context) -> Any:
    """The rule's raw score on ``c``: its number (anything else is 0), or ``SKIPPED``."""
    if rule.applies is not None and not rule.evaluate(rule.applies, c):
        return SKIPPED
    value = rule.evaluate(rule.test, c)
    return value if type(value) in (int, float) else 0


def normalized(raw: list, normalize: tuple[float, float] | None) -> list[float]:
    """A score rule's raw values scaled into its ``normalize`` range (``SKIPPED`` is 0.0)."""
    values = [v for v in raw if v is not SKIPPED]
    if normalize is None:
        return [0.0 if v is SKIPPED else float(v) for v in raw]
    low, high = normalize
    smallest, largest = min(values), max(values)
    spread = largest - smallest
    return [0.0 if v is SKIPPED else float(low if spread == 0 else low + (v - smallest) * (high - low) / spread)
            for v in raw]


def why_not(rule: CompiledRule, c: Context) -> str:
    """The reason a rule rejected: its reason template, or the automatic explanation."""
    text = rule.evaluate(rule.reason, c) if rule.reason else rule.evaluate(rule.explain, c)
    return rule.prefix + text


def why(rule: CompiledRule, c: Context) -> str:
    """The reason a rule that decides when true (permit, overused) decided."""
    text = rule.evaluate(rule.reason, c) if rule.reason else f"{rule.source} is true"
    return rule.prefix + text
