"""The data tables under tests/lang/cases: policy + wire-shaped input → decision or exact error."""

import pytest

from .harness import decide, load_cases

CASES = load_cases()


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_case(case):
    if "expr" in case:
        case = {**case, "verb": "value"}
    got = decide(case)
    if "error" in case:
        assert got == {"error": case["error"].rstrip("\n")}
        return
    assert "error" not in got, got["error"]
    want = case["want"]
    assert {k: got[k] for k in want} == want
