"""The policy examples of docs/language.md compile, and the modifier table names every modifier."""

import re
from pathlib import Path

import pytest

from policy_extender.lang.checker import MODIFIER_KINDS
from policy_extender.policyset import compile_sources

DOC = (Path(__file__).parents[2] / "docs" / "language.md").read_text(encoding="utf-8")
BLOCKS = re.findall(r"^```\n(.*?)^```$", DOC, flags=re.S | re.M)
POLICIES = [b for b in BLOCKS if re.search(r"^(filter|score|victim|preemptable|reclaimable|enqueue|overused|ready) ", b, re.M)]


@pytest.mark.parametrize("block", POLICIES, ids=[f"block{i}" for i in range(len(POLICIES))])
def test_the_docs_policy_examples_compile(block):
    assert compile_sources({"doc.policy": block}).rules


def test_the_victim_tier_example_says_if_none_abstain():
    (block,) = [b for b in POLICIES if "if none abstain" in b]
    assert [r.kind for r in compile_sources({"doc.policy": block}).rules] == ["victim"]


def test_the_modifier_table_names_every_modifier():
    table = DOC[DOC.index("### Modifiers"):DOC.index("## Rule kinds and decisions")]
    for kind in MODIFIER_KINDS:
        assert f"`{kind}" in table, kind
