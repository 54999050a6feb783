"""The editor features as plain functions of a set (``lsp.features``): what the server answers,
computed from the checker's analysis and the schema, over real files in a temporary directory."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest

from policy_extender.lsp import features
from policy_extender.lsp.documents import Documents
from policy_extender.lsp.locate import char_column, to_range, utf16_column
from policy_extender.errors import Span

ZONE = textwrap.dedent("""\
    # zone
    param min_gpu: number = 1
    shared let zoned = task.annotations["zone"] != null
    let gpus = node.idle.gpu

    filter same-zone: node.lables.zone == task.annotations.zone
        when zoned

    score packing: gpus * min_gpu
    """)
OTHER = "score other: free_gpu\n    when zoned\n"


@pytest.fixture
def policy_dir(tmp_path: Path) -> Path:
    (tmp_path / "zone.policy").write_text(ZONE)
    (tmp_path / "other.policy").write_text(OTHER)
    (tmp_path / "values.yaml").write_text("zone.min_gpu: 2\n")
    return tmp_path


@pytest.fixture
def view(policy_dir: Path):
    return Documents().refresh(policy_dir)


def position(text: str, needle: str, offset: int = 0) -> tuple[int, int]:
    """1-based (line, column) of the first ``needle`` in ``text``, ``offset`` characters into it."""
    index = text.index(needle) + offset
    line = text.count("\n", 0, index) + 1
    return line, index - (text.rfind("\n", 0, index) + 1) + 1


def test_diagnostics_of_the_whole_set_with_codes_and_positions(view):
    [error] = view.analysis.diagnostics
    assert (error.code, error.span.file, error.span.line, error.span.column) == ("E201", "zone.policy", 6, 24)
    assert "did you mean 'labels'" in error.message


def test_an_error_in_the_values_file_is_reported_in_the_values_file(policy_dir):
    (policy_dir / "values.yaml").write_text("zone.min_gpus: 2\n")
    diagnostics = Documents().refresh(policy_dir).analysis.diagnostics
    assert [(d.code, d.span.file, d.span.line) for d in diagnostics if d.span.file == "values.yaml"] == \
        [("E207", "values.yaml", 1)]


def test_unsaved_text_replaces_the_file_on_disk(policy_dir):
    documents = Documents()
    fixed = ZONE.replace("lables", "labels")
    view = documents.update(policy_dir / "zone.policy", fixed)
    assert view.analysis.diagnostics == [] and view.analysis.checked is not None
    assert documents.close(policy_dir / "zone.policy").analysis.diagnostics[0].code == "E201"


def test_a_shared_let_is_checked_across_files(policy_dir):
    documents = Documents()
    view = documents.update(policy_dir / "zone.policy", ZONE.replace("shared let zoned", "let zoned"))
    assert any(d.span.file == "other.policy" and "zoned" in d.message for d in view.analysis.diagnostics)


def test_a_configmap_volume_is_read_as_serve_reads_it(tmp_path):
    payload = tmp_path / "..2026_11_29_01_00_00.1"
    payload.mkdir()
    (payload / "zone.policy").write_text(ZONE)
    os.symlink(payload.name, tmp_path / "..data")
    os.symlink("..data/zone.policy", tmp_path / "zone.policy")
    view = Documents().refresh(tmp_path)
    assert list(view.sources) == ["zone.policy"] and view.analysis.diagnostics[0].code == "E201"


@pytest.mark.parametrize("needle, offset, expected", [
    ("lables", 0, None),  # an unknown field: nothing to say but the diagnostic
    ("annotations.zone", 0, "task.annotations: map[string]"),
    ("node.idle", 6, "node.idle: resources"),
    ("node.idle", 0, "node: node"),
    ("gpus * ", 0, "let gpus = node.idle.gpu"),
    ("min_gpu\n", 1, "param min_gpu: number = 1"),
    ("zoned\n\nscore", 0, 'shared let zoned = task.annotations["zone"] != null'),
])
def test_hover(view, needle, offset, expected):
    line, column = position(ZONE, needle, offset)
    text = features.hover(view, "zone.policy", line, column)
    assert (text is None) if expected is None else (expected in text), text


def test_hover_says_where_a_param_value_comes_from_and_which_verbs_read_a_field(view):
    param = features.hover(view, "zone.policy", *position(ZONE, "min_gpu\n"))
    assert "set to `2` by values.yaml line 1" in param
    idle = features.hover(view, "zone.policy", *position(ZONE, "idle.gpu"))
    assert "volcano: predicate, prioritize" in idle and "whole devices" in idle
    shorthand = features.hover(view, "other.policy", *position(OTHER, "free_gpu"))
    assert "free_gpu = node.idle.gpu" in shorthand


def test_an_enqueue_cap_on_total_request_is_warned_about_and_its_hover_says_why(tmp_path):
    text = "enqueue cap: job.total_request.gpu <= 16\n"
    (tmp_path / "other.policy").write_text(text)
    view = Documents().refresh(tmp_path)
    [warning] = view.analysis.diagnostics
    assert (warning.code, warning.severity, warning.span.line, warning.span.column) == ("W401", "warning", 1, 14)
    hover = features.hover(view, "other.policy", *position(text, "total_request"))
    assert "0 at enqueue for a Volcano Job" in hover and "min_resources" in hover


def test_hover_on_a_builtin_shows_its_signature(policy_dir):
    view = Documents().update(policy_dir / "other.policy", "score other: round(free_gpu)\n")
    assert features.hover(view, "other.policy", 1, 15).startswith("```\nround(")


def test_definition_of_a_let_a_shared_let_and_a_param(view):
    gpus = features.definition(view, "zone.policy", *position(ZONE, "gpus * "))
    assert gpus == [Span("zone.policy", 4, 5, 4, 9)]
    zoned = features.definition(view, "other.policy", *position(OTHER, "zoned"))
    assert zoned == [Span("zone.policy", 3, 12, 3, 17)]
    param = features.definition(view, "zone.policy", *position(ZONE, "min_gpu\n"))
    assert [(s.file, s.line) for s in param] == [("zone.policy", 2), ("values.yaml", 1)]


def test_references_across_the_set(view):
    found = features.references(view, "zone.policy", 3, 13)
    assert [(s.file, s.line) for s in found] == [("zone.policy", 3), ("other.policy", 2), ("zone.policy", 7)]
    uses = features.references(view, "zone.policy", 3, 13, declaration=False)
    assert len(uses) == 2


@pytest.mark.parametrize("text, line, column, expected, absent", [
    ("filter f: node.", 1, 16, {"labels", "idle", "tasks"}, {"uid", "node"}),
    ("filter f: task.requests.", 1, 25, {"gpu", "cpu"}, {"labels"}),
    ("protocol kube-scheduler\nfilter f: node.", 2, 16, {"labels", "allocatable"}, {"idle", "tasks"}),
    ("enqueue e: ", 1, 12, {"job", "queue", "round", "zoned"}, {"node", "task", "free_gpu"}),
    ("filter f: true\n    ", 2, 5, {"when", "reason", "unresolvable"}, {"weight", "permit"}),
    ("score s: 1\n    ", 2, 5, {"weight", "normalize"}, {"unresolvable"}),
    ("", 1, 1, {"filter", "score", "let", "param"}, {"node"}),
    ("let x = cluster.nodes[0].", 1, 26, {"labels"}, set()),
])
def test_completion(view, text, line, column, expected, absent):
    labels = {item.label for item in features.completions(view, "other.policy", text, line, column)}
    assert expected <= labels and not (absent & labels), labels


def test_completion_offers_lets_and_params_with_their_kinds(view):
    items = {i.label: i for i in features.completions(view, "zone.policy", ZONE, 9, 16)}
    assert items["min_gpu"].kind == "param" and items["gpus"].kind == "let" and items["zoned"].kind == "shared let"
    assert items["gpus"].detail == "number"


def test_quick_fix_replaces_the_misspelt_word(view):
    [error] = view.analysis.diagnostics
    fix = features.quick_fix(error, view.sources["zone.policy"])
    assert (fix.text, fix.span) == ("labels", error.span)


def test_quick_fix_for_a_misspelt_keyword(policy_dir):
    view = Documents().update(policy_dir / "other.policy", "filtr f: true\n")
    [error] = [d for d in view.analysis.diagnostics if d.span.file == "other.policy"]
    assert features.quick_fix(error, "filtr f: true\n").text == "filter"


def test_related_positions_named_in_a_message(policy_dir):
    view = Documents().update(policy_dir / "other.policy", "param a: number = 1\nparam a: number = 2\nscore s: a\n")
    [error] = [d for d in view.analysis.diagnostics if d.code == "E206"]
    assert [(s.file, s.line) for s, _ in features.related(error)] == [("other.policy", 1)]


def test_formatting_is_fmt_and_leaves_a_broken_file_alone():
    assert features.formatted("a.policy", "score   s:1+2\n") == "score s: 1 + 2\n"
    assert features.formatted("a.policy", "score s: (\n") is None
    assert features.formatted("values.yaml", "a: 1\n") is None


def test_malformed_text_never_raises(policy_dir):
    documents = Documents()
    for text in ["\x00\x01", "filter", "score s: ((((", "let = =", "param x: map[ = {", "\ufeffscore s: 1\n"]:
        view = documents.update(policy_dir / "other.policy", text)
        for line, column in [(1, 1), (1, 3), (5, 5)]:
            features.hover(view, "other.policy", line, column)
            features.completions(view, "other.policy", text, line, column)
            features.definition(view, "other.policy", line, column)
        assert view.analysis.errors


def test_a_file_outside_any_directory_set_stands_alone(tmp_path):
    lone = tmp_path / "deep" / "lone.policy"
    view = Documents().update(lone, "score s: free_gpu\n")
    assert list(view.sources) == ["lone.policy"] and view.analysis.checked is not None


def test_positions_count_utf16_units_as_the_protocol_does():
    line = 'filter f: "🚀" == node.name'
    column = line.index("node")
    assert utf16_column(line, column) == column + 1 and char_column(line, column + 1) == column
    assert to_range(Span("a", 1, column + 1, 1, column + 5), line).start.character == column + 1
