"""``policy-extender configmap`` with a values file: it is one of the set's files, so it is in the
ConfigMap and in the version the ConfigMap is annotated with; values alone are no set."""

from __future__ import annotations

from pathlib import Path

import yaml

from policy_extender import cli
from policy_extender.commands.configmap import VERSION_ANNOTATION
from policy_extender.policyset import compile_sources

POLICY = "param points: number = 1\nscore s: points\n"


def configmap(capsys, directory: Path) -> tuple[int, dict | None, str]:
    code = cli.main(["configmap", str(directory)])
    out, err = capsys.readouterr()
    return code, yaml.safe_load(out) if out else None, err


def write(directory: Path, files: dict[str, str]) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (directory / name).write_text(text)
    return directory


def test_the_values_file_is_in_the_configmap_and_its_version(tmp_path, capsys):
    files = {"a.policy": POLICY, "values.yaml": "a.points: 3\n"}
    code, document, err = configmap(capsys, write(tmp_path / "p", files))
    assert code == 0, err
    assert document["data"] == files
    version = document["metadata"]["annotations"][VERSION_ANNOTATION]
    assert version == compile_sources(files).version
    assert version != compile_sources({**files, "values.yaml": "a.points: 4\n"}).version
    assert version != compile_sources({"a.policy": POLICY}).version


def test_a_wrong_value_is_refused_with_both_positions(tmp_path, capsys):
    code, document, err = configmap(capsys, write(tmp_path / "p", {"a.policy": POLICY, "values.yaml": "a.pionts: 3\n"}))
    assert code == 1 and document is None
    assert "values.yaml:1:1: error[E207]: a.policy declares no parameter 'pionts' (did you mean 'points'?)" in err
    assert "hint: a.policy declares: points (a.policy:1:7)" in err


def test_values_without_a_policy_are_an_empty_set(tmp_path, capsys):
    code, document, err = configmap(capsys, write(tmp_path / "p", {"values.yaml": "a.points: 3\n"}))
    assert code == 1 and document is None
    assert "no policy file (*.policy) directly in it: serve would refuse an empty set" in err
