"""Fuzz the language (small profile; ``python -m tests.tools.fuzz --examples 100000`` is the long
run): whatever the text, compiling raises only PolicyError and evaluating what compiled, on real
wire views in and out of a session, raises only EvalError."""

from __future__ import annotations

import string
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from policy_extender.errors import PolicyError
from policy_extender.policyset import compile_sources
from tests.tools import strategies
from tests.tools.fuzz import DEADLINE
from tests.tools.oracle import compile_and_evaluate

PROFILE = settings(max_examples=200, deadline=DEADLINE, suppress_health_check=list(HealthCheck))
HANG_GUARD = 10.0  # seconds


@PROFILE
@given(st.text(alphabet=string.printable, max_size=300))
def test_random_text(text):
    compile_and_evaluate(text)


@PROFILE
@given(strategies.token_streams())
def test_token_streams(text):
    compile_and_evaluate(text)


@PROFILE
@given(strategies.trees())
@pytest.mark.slow
def test_syntax_trees_rendered_to_text(text):
    compile_and_evaluate(text)


@PROFILE
@given(strategies.mutated_policies())
@pytest.mark.slow
def test_mutated_example_policies(text):
    compile_and_evaluate(text)


@pytest.mark.parametrize("path", strategies.POLICIES, ids=lambda p: p.name)
def test_the_mutation_seeds_reach_evaluation(path):
    """The seeds of the mutations compile and decide, so mutants are evaluated, not only parsed."""
    assert compile_and_evaluate(path.read_text()) == "decided"


NESTINGS = [("(", ")"), ("1 + (", ")"), ("-", ""), ("[", "]"), ("not ", ""), ("len(", ")"), ("x.a[", "]"),
            ("sum(1 for x in ", ")"), ("if true then ", " else 0")]


@pytest.mark.parametrize("depth", [101, 5_000, 60_000])
@pytest.mark.parametrize("opening,closing", NESTINGS)
@pytest.mark.slow
def test_very_deep_nesting_is_a_clean_error(depth, opening, closing):
    started = time.monotonic()
    with pytest.raises(PolicyError) as caught:
        compile_sources({"deep.policy": strategies.deep_nesting(depth, opening, closing)})
    assert time.monotonic() - started < HANG_GUARD
    codes = {d.code for d in caught.value.diagnostics}
    assert codes in ({"E502"}, {"E501"}), caught.value.render()[:500]



def test_very_long_input_is_a_clean_error():
    with pytest.raises(PolicyError) as caught:
        compile_sources({"long.policy": strategies.long_input(300_000)})
    [diagnostic] = caught.value.diagnostics
    assert diagnostic.code == "E501"
    assert diagnostic.message.startswith("policy file is ") and diagnostic.message.endswith(
        " characters, the limit is 262144")
