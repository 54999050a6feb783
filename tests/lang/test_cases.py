"""The data tables under tests/lang/cases: policy + wire-shaped input → decision or exact error."""

import pytest

from policy_extender.errors import EvalError

from .harness import decide, load_cases

CASES = load_cases()


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_case(case):
    if "expr" in case:
        case = {**case, "verb": "value"}
    try:
        got = decide(case)
    except EvalError as err:  # a bound met while evaluating (E51x): the rule errs, as served
        got = {"error": str(err)}
    if "error" in case:
        assert got == {"error": case["error"].rstrip("\n")}
        return
    if "warning" in case:
        assert got == {"warning": case["warning"].rstrip("\n")}
        return
    assert "error" not in got, got["error"]
    want = case["want"]
    assert {k: got[k] for k in want} == want
