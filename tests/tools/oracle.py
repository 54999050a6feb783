"""The property every fuzzed text must hold, with counters of what happened."""

from __future__ import annotations

from collections import Counter

from policy_extender.errors import EvalError, PolicyError
from policy_extender.policyset import compile_sources
from tests.tools.views import evaluate_in_and_out_of_session

OUTCOMES: Counter = Counter()


def compile_and_evaluate(text: str) -> str:
    """Only PolicyError escapes compiling, only EvalError escapes evaluating what compiled.

    Returns the outcome (refused, decided or bounded) and counts it; anything else propagates."""
    try:
        policy_set = compile_sources({"fuzz.policy": text})
    except PolicyError as err:
        assert err.diagnostics and err.render(), "a PolicyError must say where and what"
        return _count("refused")
    try:
        evaluate_in_and_out_of_session(policy_set)
    except EvalError as err:
        assert err.code.startswith("E5"), err
        return _count("bounded")
    return _count("decided")


def _count(outcome: str) -> str:
    OUTCOMES[outcome] += 1
    return outcome
