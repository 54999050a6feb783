"""Bugs the reliability work found in the language, each pinned by the case that showed it.

Every test here failed before its fix (see git log for the commit that fixed it)."""

from __future__ import annotations



from policy_extender.policy import compile_sources
from reliability.views import evaluate_in_and_out_of_session



def doubled_string(lets: int) -> str:
    """Lets that build a string of 2**lets characters by doubling (no repetition operator)."""
    return "\n".join(['let s0 = "a"'] + [f"let s{i} = s{i - 1} + s{i - 1}" for i in range(1, lets + 1)])


def test_number_of_a_huge_exponent_is_null_not_a_decimal_overflow():
    policy = compile_sources({"n.policy": 'filter n: number("9e999999999") == null\n'
                                           'filter m: number("9e999999E") == null\n'})
    evaluate_in_and_out_of_session(policy)  # raised decimal.Overflow before the fix
