"""Error recovery: every statement's syntax error is reported, the statements that parsed are
checked, and many errors cost time linear in their number (a hang guard, not a speed target)."""

from __future__ import annotations

import time

import pytest

from policy_extender.errors import PolicyError
from policy_extender.lang.parser import MAX_SOURCE_CHARS, parse_file, statement_chunks
from policy_extender.policyset import compile_sources

HANG_GUARD = 20.0  # seconds: minutes before error rendering split the source once per error


def test_statements_are_cut_where_a_line_starts_at_column_1():
    source = "# head\n\nfilter a: x and\n    # note\n    y\nlet b = 1\n\tscore c: 2\n"
    assert statement_chunks(source) == [(1, "# head\n\n"), (3, "filter a: x and\n    # note\n    y\n"),
                                        (6, "let b = 1\n\tscore c: 2\n")]


def test_the_statements_that_parse_are_kept_beside_the_errors():
    with pytest.raises(PolicyError) as caught:
        parse_file("a.policy", "filter a: (\nfilter b: true\nlet c = = 1\nscore d: 1\n")
    partial = caught.value.partial
    assert [(type(s).__name__, getattr(s, "name", None)) for s in partial.statements] == [
        ("RuleStatement", "b"), ("Let", "c"), ("RuleStatement", "d")]
    assert partial.statements[1].expr is None  # stands for the let that did not parse
    assert [d.span.line for d in caught.value.diagnostics] == [1, 3]


@pytest.mark.parametrize("statement", ["filter x: (\n", "filter x: a = 1\n", "let a = 1 +\n", "score s: nope.x\n"])
@pytest.mark.slow
def test_a_file_full_of_errors_is_refused_in_linear_time(statement):
    text = statement * (MAX_SOURCE_CHARS // len(statement) - 1)
    started = time.monotonic()
    with pytest.raises(PolicyError) as caught:
        compile_sources({"a.policy": text})
    assert len(caught.value.diagnostics) >= text.count("\n") - 1
    assert caught.value.render()
    assert time.monotonic() - started < HANG_GUARD
