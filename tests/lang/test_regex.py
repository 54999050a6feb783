"""matches() runs on RE2 (lang/regex.py): the patterns that made Python's backtracking ``re``
exponential or cubic now compile to the linear-time engine, and the constructs RE2 lacks are
refused when the policy loads, at the pattern's file:line:col, with what to write instead.
(Timings, before and after: ``python -m bench.cpu.regex``; here only answers and codes.)"""

from __future__ import annotations

import pytest
import re2

from policy_extender.errors import PolicyError
from policy_extender.lang import regex
from policy_extender.policyset import compile_sources


def prepared_pattern(pattern: str) -> regex.Pattern:
    """The pattern of a one-rule set, as the checker prepared it for the compiled rule."""
    program = compile_sources({"r.policy": f"filter r: matches(task.name, {pattern!r})\n"})._program
    [prepared] = program.checked.prepared.values()
    assert isinstance(prepared, regex.Pattern)
    return prepared


@pytest.mark.parametrize("pattern", ["(a?){26}a{26}", "(a?){200}a{200}", ".*.*=", ".*.*.*=", "(a+)+$", "(a|aa)*$"])
def test_patterns_that_backtracked_compile_to_the_linear_engine(pattern):
    compiled = prepared_pattern(pattern)
    assert isinstance(compiled, regex.Pattern) and compiled.source == pattern
    assert isinstance(compiled.search.__self__, re2.Set)  # a bound method


def test_the_exponential_pattern_answers_as_before():
    search = prepared_pattern("(a?){26}a{26}").search
    assert search("a" * 26) is not None  # 4.5 s on Python's re (issue 44)
    assert search("a" * 25) is None
    assert search("b" + "a" * 26 + "b") is not None


def test_the_cubic_pattern_over_a_thousand_node_names():
    search = prepared_pattern(".*.*=").search
    names = [f"node-{i:04d}-" + "x" * 243 for i in range(1000)]  # 2.3-3.9 s a pass on Python's re
    assert [n for n in names if search(n) is not None] == []
    assert search(names[0] + "=") is not None


REFUSED = [  # (pattern as written in the policy, column of the construct, what, fix)
    (r'"(a*)\\1"', "a backreference", "compare the parts with == after split()"),
    (r'"(?P<x>a)(?P=x)"', "a backreference", "compare the parts with == after split()"),
    (r'"a(?=b)"', "a lookahead", 'split the test in two: matches(s, "A") and not matches(s, "B")'),
    (r'"a(?!b)"', "a negative lookahead", "split the test in two"),
    (r'"(?<=a)b"', "a lookbehind", "match the preceding text too"),
    (r'"(?<!a)b"', "a negative lookbehind", "split the test in two"),
    (r'"(?>a+)b"', "an atomic group", "write the group without `?>`"),
    (r'"a++b"', "a possessive quantifier", "drop the trailing `+` of the quantifier"),
    (r'"a{2,3}+b"', "a possessive quantifier", "drop the trailing `+` of the quantifier"),
    (r'"(a)?(?(1)b|c)"', "a conditional group", "write the alternatives out with `|`"),
    (r'"gpu\\Z"', "`\\Z`", "write `$` (or `\\z`)"),
]


@pytest.mark.parametrize("written,what,fix", REFUSED, ids=[r[1] + " " + r[0] for r in REFUSED])
def test_constructs_re2_lacks_are_refused_at_check_time_where_they_are(written, what, fix):
    text = f"# pools\nfilter gpu:   matches(node.name, {written})\n"
    with pytest.raises(PolicyError) as caught:
        compile_sources({"pools.policy": text})
    [diagnostic] = caught.value.diagnostics
    assert diagnostic.code == "E504"
    assert (diagnostic.span.file, diagnostic.span.line, diagnostic.span.column) == ("pools.policy", 2, 34)
    assert f" uses {what} (at character " in diagnostic.message
    assert "which RE2, the linear-time engine of matches(), does not have: " + fix in diagnostic.message
    assert caught.value.render().startswith("pools.policy:2:34: error[E504]: regex ")


@pytest.mark.parametrize("pattern", [r"[(?=]", r"\(?=x", r"a\\1", r"[\\]1", r"\Qx\E", r"(?P<name>a)", r"(?i:gpu)", r"\z"])
def test_look_alikes_in_classes_and_escapes_are_not_refused(pattern):
    assert regex.refusal(pattern) is None
    assert isinstance(regex.compile_pattern(pattern), regex.Pattern)


def test_other_patterns_re2_cannot_parse_are_invalid_with_re2s_message():
    with pytest.raises(regex.Refused) as caught:
        regex.compile_pattern("[a-")
    assert (caught.value.code, str(caught.value)) == ("E308", "invalid regex '[a-': missing ]: [a-")


def test_re2_semantics_that_differ_from_pythons_re_as_documented():
    """docs/language.md, "Regexes": \\d is ASCII, $ only at the very end, \\p{...} classes exist."""
    assert regex.compile_pattern(r"^\d+$").search("\u0663") is None  # Python's re: a match
    assert regex.compile_pattern("gpu$").search("gpu\n") is None      # Python's re: a match
    assert regex.compile_pattern(r"^\p{Greek}+$").search("αβγ") is not None  # Python's re: an error


def test_a_pattern_too_large_for_the_automaton_is_refused_with_its_size():
    with pytest.raises(regex.Refused) as caught:
        regex.compile_pattern("(a?){1000}a{1000}")
    assert caught.value.code == "E308"
    assert str(caught.value) == ("regex '(a?){1000}a{1000}' compiles to 5004 instructions, more than 2048: "
                                 "shorten it or bound its repeats ({1,10}, not {1,500})")


def test_the_largest_pattern_accepted_matches_as_re2_searches_it():
    """At MAX_PROGRAM the DFA still fits: the Set's answer is the full engine's on 256 characters."""
    pattern = "(a?){450}a{200}"  # 2004 instructions
    compiled = regex.compile_pattern(pattern)
    answers = []
    for subject in ("a" * 256, "b" + "a" * 200, "a" * 199 + "b", "ab" * 128):
        answers.append(compiled.search(subject) is not None)
        assert answers[-1] == (re2.search(pattern, subject) is not None)
    assert answers == [True, True, False, False]
