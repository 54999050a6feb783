"""Bugs the reliability work found in the language, each pinned by the case that showed it.

Every test here failed before its fix (see git log for the commit that fixed it)."""

from __future__ import annotations

import time

import pytest

from policy_extender.errors import EvalError
from policy_extender.policyset import compile_sources
from tests.tools.views import evaluate_in_and_out_of_session

HANG_GUARD = 20.0  # seconds: only catches a hang, never a performance target


def doubled_string(lets: int) -> str:
    """Lets that build a string of 2**lets characters by doubling (no repetition operator)."""
    return "\n".join(['let s0 = "a"'] + [f"let s{i} = s{i - 1} + s{i - 1}" for i in range(1, lets + 1)])


def test_number_of_a_huge_exponent_is_null_not_a_decimal_overflow():
    policy = compile_sources({"n.policy": 'filter n: number("9e999999999") == null\n'
                                           'filter m: number("9e999999E") == null\n'})
    evaluate_in_and_out_of_session(policy)  # raised decimal.Overflow before the fix


@pytest.mark.slow
def test_nested_aggregates_are_bounded_by_the_evaluation_work_budget():
    source = doubled_string(12) + '\nfilter a: sum(sum(1 for y in split(s12, "")) for x in split(s12, "")) > 0\n'
    policy = compile_sources({"a.policy": source})
    started = time.monotonic()
    with pytest.raises(EvalError) as caught:
        evaluate_in_and_out_of_session(policy)  # ~60 s of work at 4096, hours at 65536, before the fix
    assert time.monotonic() - started < HANG_GUARD
    assert caught.value.code == "E512"
    assert caught.value.message == ("the call visited more than 1000000 elements (nested aggregates, list "
                                    "operations inside one, or an aggregate in a rule evaluated once per node "
                                    "or evictee); limit 1000000")


@pytest.mark.slow
def test_membership_tests_inside_an_aggregate_count_against_the_budget():
    source = doubled_string(14) + '\nlet l = split(s14, "")\nfilter a: count(x for x in l if "b" in l) == 0\n'
    policy = compile_sources({"a.policy": source})
    started = time.monotonic()
    with pytest.raises(EvalError) as caught:
        evaluate_in_and_out_of_session(policy)
    assert time.monotonic() - started < HANG_GUARD
    assert caught.value.code == "E512"


def test_regexes_that_backtracked_polynomially_run_in_linear_time():
    # refused at load time (E504) from the cost check's fix until RE2: ~22 s per call at 4096 before it
    source = doubled_string(8) + '\nfilter r: not matches(s8, ".*.*.*=")\nfilter q: not matches(s8, "a*a*a*a*a*c")\n'
    policy = compile_sources({"r.policy": source})
    started = time.monotonic()
    evaluate_in_and_out_of_session(policy)
    assert time.monotonic() - started < HANG_GUARD


def test_the_costliest_accepted_regex_stays_fast_on_the_longest_subject():
    source = doubled_string(8) + '\nfilter r: not matches(s8, ".*.*=")\nfilter q: not matches(s8, "^.*.*.*=")\n'
    policy = compile_sources({"r.policy": source})
    started = time.monotonic()
    evaluate_in_and_out_of_session(policy)
    assert time.monotonic() - started < HANG_GUARD
