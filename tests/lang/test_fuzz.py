"""Property tests: whatever the text, parse/check/compile raise nothing but PolicyError.

A small profile runs in the normal suite; a long fuzz run can raise max_examples."""

import string

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from policy_extender.errors import PolicyError
from policy_extender.policyset import compile_sources

TOKENS = ["filter", "score", "victim", "enqueue", "overused", "ready", "preemptable", "when", "let",
          "reason", "unresolvable", "weight", "normalize", "to", "permit", "if", "then", "else", "and",
          "or", "not", "in", "for", "true", "false", "null", "sum", "count", "any", "all", "min", "max",
          "len", "matches", "has", "tolerates", "number", "task", "node", "job", "queue", "session",
          "evictor", "evictee", "free_gpu", "labels", "annotations", "idle", "gpu", "tasks", "x", "zone-a:",
          ".", ",", "(", ")", "[", "]", "==", "!=", "<", "<=", ">", ">=", "??", "+", "-", "*", "/", "%",
          "**", "=", "1", "0", "4Gi", "500m", "1e3", "99999999999999999999", "'a'", '"{task.name}"',
          '"(a+)+"', "'\\q'", "\n", "\n    ", "#c\n", "{", "}", "$"]
SMALL = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _compiles_or_refuses(text: str) -> None:
    try:
        compile_sources({"fuzz.policy": text})
    except PolicyError as err:
        assert err.diagnostics and err.render()


@SMALL
@given(st.text(alphabet=string.printable, max_size=200))
def test_random_text_only_raises_policy_error(text):
    _compiles_or_refuses(text)


@SMALL
@given(st.lists(st.sampled_from(TOKENS), max_size=40))
def test_random_token_streams_only_raise_policy_error(tokens):
    _compiles_or_refuses(" ".join(tokens))


@SMALL
@given(st.lists(st.sampled_from(TOKENS), max_size=30))
def test_token_streams_after_a_rule_start_only_raise_policy_error(tokens):
    _compiles_or_refuses("filter r: " + " ".join(tokens))
