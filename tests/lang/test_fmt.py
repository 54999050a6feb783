"""``fmt``: the canonical layout keeps the program (same AST, spans aside), keeps every comment,
and is a fixed point (formatting formatted text changes nothing). Checked on every bundled
policy and on every fuzz-corpus input that parses (the generators of tests/lang/test_fuzz.py and
reliability/strategies.py)."""

from __future__ import annotations

import string
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from policy_extender.errors import PolicyError
from policy_extender.lang.formatter import comments_of, format_source, shape
from policy_extender.lang.parser import parse_file
from tests.tools import strategies

from .test_fuzz import TOKENS

ROOT = Path(__file__).resolve().parents[2]
BUNDLED = sorted((ROOT / "policies").glob("*.policy")) + sorted((ROOT / "policies" / "library").glob("*.policy"))
PROFILE = settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))


def assert_formats_faithfully(name: str, text: str) -> None:
    formatted = format_source(name, text)
    assert shape(parse_file(name, formatted)) == shape(parse_file(name, text)), formatted
    assert format_source(name, formatted) == formatted
    assert [c.text for c in comments_of(formatted)] == [c.text for c in comments_of(text)]


def formats_if_it_parses(text: str) -> None:
    try:
        parse_file("fuzz.policy", text)
    except PolicyError:
        return
    assert_formats_faithfully("fuzz.policy", text)


@pytest.mark.parametrize("path", BUNDLED, ids=lambda p: p.name)
def test_bundled_policies_format_to_the_same_program(path):
    assert_formats_faithfully(path.name, path.read_text())


@PROFILE
@given(strategies.trees())
@pytest.mark.slow
def test_syntax_trees_format_to_the_same_program(text):
    formats_if_it_parses(text)


@PROFILE
@given(strategies.mutated_policies())
@pytest.mark.slow
def test_mutated_policies_format_to_the_same_program(text):
    formats_if_it_parses(text)


@PROFILE
@given(strategies.token_streams())
def test_token_streams_format_to_the_same_program(text):
    formats_if_it_parses(text)


@PROFILE
@given(st.lists(st.sampled_from(TOKENS), max_size=30))
def test_rule_token_streams_format_to_the_same_program(tokens):
    formats_if_it_parses("filter r: " + " ".join(tokens))


@PROFILE
@given(st.text(alphabet=string.printable, max_size=200))
def test_random_text_formats_to_the_same_program(text):
    formats_if_it_parses(text)


MESSY = """\
# zone placement


  let zone=node.labels["topology.kubernetes.io/zone"]   # the node's zone
filter same-zone:zone==task.annotations.zone and
    # only tasks that name one
    has(task.annotations.zone)
    unresolvable


    reason 'zone {zone} is not the task\\'s'  # shown to users
    # keep this rule first
score  pack:( node.used.gpu+1 )*2??0   weight -1.5e3  normalize 0 to 4Gi



# the end
"""

FORMATTED = """\
# zone placement

let zone = node.labels["topology.kubernetes.io/zone"]  # the node's zone
# only tasks that name one
filter same-zone: zone == task.annotations.zone and has(task.annotations.zone)
    unresolvable
    reason 'zone {zone} is not the task\\'s'  # shown to users
    # keep this rule first
score pack: (node.used.gpu + 1) * 2 ?? 0
    weight -1.5e3
    normalize 0 to 4Gi

# the end
"""


def test_the_canonical_layout():
    assert format_source("a.policy", MESSY) == FORMATTED
    assert_formats_faithfully("a.policy", MESSY)


def test_parentheses_only_where_precedence_needs_them():
    cases = {"filter a: (1 + 2) * 3 > (4)\n": "filter a: (1 + 2) * 3 > 4\n",
             "filter a: 1 - (2 - 3) == 1 - 2 - 3\n": "filter a: 1 - (2 - 3) == 1 - 2 - 3\n",
             "filter a: not (x and y) or (not z)\n": "filter a: not (x and y) or not z\n",
             "filter a: (1 < 2) == true\n": "filter a: (1 < 2) == true\n",
             "score a: (if x then 1 else 2) + [1,2,][0]\n": "score a: (if x then 1 else 2) + [1, 2][0]\n"}
    for text, want in cases.items():
        assert format_source("a.policy", text) == want
        assert_formats_faithfully("a.policy", text)


def cli(*args):
    import subprocess
    import sys
    return subprocess.run([sys.executable, "-m", "policy_extender", "fmt", *map(str, args)],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)


@pytest.mark.slow
def test_fmt_rewrites_files_and_check_reports_with_a_diff(tmp_path):
    messy, tidy = tmp_path / "a.policy", tmp_path / "b.policy"
    messy.write_text("filter a:true  # c\nscore b: 1+2\n")
    tidy.write_text("filter c: true\n")
    checked = cli("--check", tmp_path)
    assert checked.returncode == 1
    assert checked.stdout == (f"--- {messy}\n+++ {messy} (formatted)\n@@ -1,2 +1,2 @@\n"
                              "-filter a:true  # c\n-score b: 1+2\n+filter a: true  # c\n+score b: 1 + 2\n")
    assert messy.read_text() == "filter a:true  # c\nscore b: 1+2\n"  # --check changes nothing
    done = cli(tmp_path)
    assert done.returncode == 0, done.stderr
    assert messy.read_text() == "filter a: true  # c\nscore b: 1 + 2\n"
    assert done.stderr == "fmt: 2 policy files: 1 reformatted, 1 already formatted\n"
    again = cli("--check", tmp_path)
    assert (again.returncode, again.stdout) == (0, "")


@pytest.mark.slow
def test_fmt_leaves_a_file_with_syntax_errors_alone(tmp_path):
    broken = tmp_path / "a.policy"
    broken.write_text("filter a: task.name = 'x'\n")
    done = cli(broken)
    assert done.returncode == 2
    assert f"{broken}:1:21: error[E101]: '=' is not a comparison (did you mean '=='?)" in done.stderr
    assert broken.read_text() == "filter a: task.name = 'x'\n"


def test_a_modifier_kind_without_a_printer_is_kept_as_written(monkeypatch):
    """A kind added to the grammar before the formatter's table learns it is not lost."""
    from policy_extender.lang import formatter
    monkeypatch.delitem(formatter.MODIFIERS, "normalize")
    text = "score s: 1\n    normalize  0 # low\n      to   100\n"
    formatted = format_source("a.policy", text)
    assert formatted == "score s: 1\n    # low\n    normalize  0 to   100\n"
    assert format_source("a.policy", formatted) == formatted


def test_a_head_longer_than_100_columns_is_wrapped_before_its_top_level_operators():
    text = ("filter long: task.annotations['scheduling.example.com/tier'] == 'gold' or (task.priority > 1000 and "
            "node.labels['node.example.com/pool'] != 'spot') or has(task.annotations.override)  # why\n"
            "let tainted = any(t.key == 'node.example.com/maintenance' and not tolerates(task.tolerations, t) "
            "for t in node.taints if t.effect != 'PreferNoSchedule')\n"
            "score s: if task.annotations['scheduling.example.com/placement'] == 'pack' then node.used.gpu "
            "else node.idle.gpu - task.requests.gpu\n"
            "    when task.annotations['scheduling.example.com/placement'] != null and task.requests.gpu > 0 and "
            "node.allocatable.gpu > 0\n")
    formatted = format_source("a.policy", text)
    assert formatted == """\
filter long: task.annotations['scheduling.example.com/tier'] == 'gold'
        or task.priority > 1000 and node.labels['node.example.com/pool'] != 'spot'
        or has(task.annotations.override)  # why
let tainted = any(t.key == 'node.example.com/maintenance' and not tolerates(task.tolerations, t)
        for t in node.taints
        if t.effect != 'PreferNoSchedule')
score s: if task.annotations['scheduling.example.com/placement'] == 'pack'
        then node.used.gpu
        else node.idle.gpu - task.requests.gpu
    when task.annotations['scheduling.example.com/placement'] != null
            and task.requests.gpu > 0
            and node.allocatable.gpu > 0
"""
    assert_formats_faithfully("a.policy", text)


def test_the_victim_if_none_modifier_is_printed_in_its_canonical_place():
    text = 'victim keep:   evictee.priority   <  evictor.priority\n    if none    abstain\n'
    formatted = format_source("keep.policy", text)
    assert formatted == "victim keep: evictee.priority < evictor.priority\n    if none abstain\n"
    assert_formats_faithfully("keep.policy", text)


@pytest.mark.slow
def test_shared_lets_params_and_named_weights_keep_their_statements(tmp_path):
    """``shared let``, ``param`` and a ``weight``/``normalize`` naming a param are printed as
    such (not as a plain let, not lost), canonically, and the file and its values still load."""
    from policy_extender import lang
    from policy_extender.policyset import read_sources
    text = ("shared  let zone = 'a'\nparam   w : number = -2\nparam m: map[number] = { \"a\": 1,\n    \"b\": 2 }\n"
            "score s: m['a'] * w\n    weight   w\n    normalize 0 to  w\nfilter f: task.name == zone\n")
    formatted = format_source("a.policy", text)
    assert formatted == ("shared let zone = 'a'\nparam w: number = -2\nparam m: map[number] = {\"a\": 1, \"b\": 2}\n"
                         "score s: m['a'] * w\n    weight w\n    normalize 0 to w\nfilter f: task.name == zone\n")
    assert_formats_faithfully("a.policy", text)
    (tmp_path / "a.policy").write_text(formatted)
    (tmp_path / "values.yaml").write_text("a.w: 3\n")
    done = cli(tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stderr == "fmt: 1 policy file: 0 reformatted, 1 already formatted\n"  # values.yaml is no policy
    (score,) = [r for r in lang.compile(read_sources([tmp_path])).rules if r.name == "s"]
    assert (score.weight, score.normalize) == (3, (0, 3))
