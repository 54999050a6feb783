"""Shared definitions and parameters that load: what a rule reads, and what the values file sets
(the errors are golden cases in cases/errors.yaml)."""

from __future__ import annotations

import pytest

from policy_extender import lang
from policy_extender.errors import PolicyError
from policy_extender.policyset import compile_sources

from .harness import decide

LIBRARY_LIKE = ('param weight: number = 1\nparam resources: map[number] = {"nvidia.com/gpu": 2, "cpu": 1}\n'
                'score binpack: resources["nvidia.com/gpu"] ?? 0\n    weight weight\n')


def rule(program, name):
    return next(r for r in program.rules if r.name == name)


@pytest.mark.parametrize("values", [
    "binpack.resources.nvidia.com/gpu: 4\nbinpack.weight: 3\n",
    "binpack:\n  weight: 3\n  resources.nvidia.com/gpu: 4\n",
    "binpack:\n  weight: 3\n  resources:\n    nvidia.com/gpu: 4\n",
])
def test_the_three_spellings_of_a_key_set_one_value(values):
    sources = {"binpack.policy": LIBRARY_LIKE, "values.yaml": values}
    program = lang.compile(sources)
    assert rule(program, "binpack").weight == 3
    got = decide({"policies": sources, "verb": "prioritize", "input": {}})
    assert set(got["scores"].values()) == {4 * 3}


def test_a_map_keeps_the_defaults_of_the_keys_not_set():
    policy = ('param resources: map[number] = {"nvidia.com/gpu": 2, "cpu": 1}\n'
              'score binpack: (resources["nvidia.com/gpu"] ?? 0) + (resources["cpu"] ?? 0)\n')
    sources = {"binpack.policy": policy, "values.yaml": "binpack.resources.nvidia.com/gpu: 4\n"}
    got = decide({"policies": sources, "verb": "prioritize", "input": {}})
    assert set(got["scores"].values()) == {4 + 1}


def test_a_shared_let_is_read_by_every_file_and_may_set_a_weight():
    program = lang.compile({
        "a.policy": 'shared let pool = "a100"\nshared let gpu_weight = 5\nshared let in_pool = node.labels["pool"] == pool\n',
        "b.policy": "filter b: in_pool\nscore c: 1\n    weight gpu_weight\n",
    })
    assert rule(program, "c").weight == 5
    assert [w.message for w in program.checked.warnings] == []


def test_an_unused_shared_let_is_a_warning():
    program = lang.compile({"a.policy": "shared let unused = 1\nfilter f: true\n"})
    assert [w.message for w in program.checked.warnings] == ["let 'unused' is never used"]


def test_a_shared_let_reads_only_the_shared_lets_above_it_in_its_file():
    with pytest.raises(PolicyError) as raised:
        lang.compile({"a.policy": "let local = 1\nshared let s = local\nfilter f: s == 1\n"})
    assert "a.policy:2:16: error[E202]: unknown name 'local'" in str(raised.value)


def test_a_let_reads_a_param_declared_below_it():
    program = lang.compile({"a.policy": "let doubled = w * 2\nparam w: number = 2\nscore s: doubled\n"})
    assert program.rules[0].name == "s"


def test_the_version_covers_the_values_file():
    policy = "param w: number = 1\nscore s: w\n"
    versions = {compile_sources({"a.policy": policy}).version,
                compile_sources({"a.policy": policy, "values.yaml": "a.w: 2\n"}).version,
                compile_sources({"a.policy": policy, "values.yaml": "a.w: 3\n"}).version}
    assert len(versions) == 3


def test_the_docs_shared_definitions_example_loads_as_two_files():
    import re
    from pathlib import Path
    doc = (Path(__file__).parents[2] / "docs" / "language.md").read_text(encoding="utf-8")
    (block,) = re.findall(r"^```\n(# pools.policy\n.*?)^```$", doc, flags=re.S | re.M)
    files = dict(re.findall(r"^# (\S+?\.policy)\b.*?\n(.*?)(?=^# \S+\.policy|\Z)", block, flags=re.S | re.M))
    assert sorted(files) == ["gpu-only.policy", "pools.policy"]
    program = lang.compile(files)
    assert [r.name for r in program.rules] == ["gpu-only"]
    with pytest.raises(PolicyError):  # the rule's file alone does not know the shared names
        lang.compile({"gpu-only.policy": files["gpu-only.policy"]})
