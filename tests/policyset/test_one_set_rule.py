"""One rule for which files make a policy set (``policyset/files.py``), the same in every command.

A directory's set is the ``*.policy`` files directly in it, hidden names and dangling links left
out, a ConfigMap volume's ``..data`` payload; a subdirectory is never part of it. ``check DIR``
says which files under DIR the set leaves out; an empty set is a load error unless it is allowed.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import pytest

from policy_extender.commands import check, fmt
from policy_extender.fixture_runner.loader import load_file
from policy_extender.fixture_runner.runner import policy_files_tested
from policy_extender.policyset import load_directories
from policy_extender.policyset.compile import SUFFIXES
from policy_extender.policyset.files import read_snapshot
from policy_extender.policyset.reload import PolicyReloader

from .kubelet import ConfigMapVolume

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = "cases:\n  - name: fits\n    decision: filter\n    input: {task: {name: t}, node: {name: n}}\n    expect: {fits: true}\n"


def messy(directory: Path) -> Path:
    """A directory with every kind of file a set must leave out, beside two that make it."""
    directory.mkdir()
    (directory / "a.policy").write_text("filter a: true\n")
    (directory / "b.policy").write_text("score b: 1\n")
    (directory / ".a.policy.swp.policy").write_text("this is an editor's file\n")
    (directory / "notes.txt").write_text("not a policy\n")
    os.symlink("gone.policy", directory / "dangling.policy")
    (directory / "library").mkdir()
    (directory / "library" / "lib.policy").write_text("score lib: 2\n")
    (directory / "library" / "deeper").mkdir()
    (directory / "library" / "deeper" / "deep.policy").write_text("score deep: 3\n")
    (directory / "a.fixtures.yaml").write_text(FIXTURE)
    return directory


def check_run(capsys, *paths, json_format=False) -> tuple[int, str, str]:
    args = argparse.Namespace(paths=[str(p) for p in paths], format="json" if json_format else "text",
                              strict=False)
    code = check.run(args)
    out, err = capsys.readouterr()
    return code, out, err


def test_every_command_reads_the_set_serve_loads(tmp_path):
    directory = messy(tmp_path / "p")
    served = sorted(read_snapshot([str(directory)], SUFFIXES).files)
    assert served == ["a.policy", "b.policy"]
    assert sorted(load_directories([directory]).sources) == served  # eval, replay, configmap
    assert [p.name for p in check.policy_sets([directory])[0]] == ["p"]
    assert sorted(Path(f).name for f in check.check_set((directory,))["files"]) == served
    assert [p.name for p in fmt.policy_files([directory])] == served
    assert [p.name for p in load_file(directory / "a.fixtures.yaml")[0].policy_files] == served
    tested = policy_files_tested([directory])
    assert [p.name for p in tested[directory]] == served
    assert [p.name for p in tested[directory / "library"]] == ["lib.policy"]  # a set of its own


def test_a_configmap_volume_is_its_payload_for_every_command(tmp_path):
    volume = ConfigMapVolume(str(tmp_path / "p"))
    volume.update({"a.policy": "filter a: true\n", "a.fixtures.yaml": FIXTURE})
    volume.update({"b.policy": "score b: 1\n", "a.fixtures.yaml": FIXTURE})  # a.policy went away
    directory = Path(volume.root)
    assert sorted(read_snapshot([volume.root], SUFFIXES).files) == ["b.policy"]
    assert [p.name for p in fmt.policy_files([directory])] == ["b.policy"]
    assert [p.name for p in load_file(directory / "a.fixtures.yaml")[0].policy_files] == ["b.policy"]
    assert [p.name for p in policy_files_tested([directory])[directory]] == ["b.policy"]


def test_check_counts_the_served_set_and_names_the_files_it_leaves_out(tmp_path, capsys):
    directory = messy(tmp_path / "p")
    code, out, err = check_run(capsys, directory)
    assert code == 0
    assert out == "ok: 2 policy files, 2 rules, no errors\n"
    assert "2 policy files in subdirectories are not part of any set checked" in err
    assert f"\n  {directory}/library/deeper/deep.policy\n  {directory}/library/lib.policy\n" in err
    assert f"check them as a set of their own: policy-extender check {directory}/library {directory}/library/deeper" in err
    assert ".swp" not in err and "dangling" not in err and "notes" not in err


def test_check_names_nothing_left_out_when_the_subdirectories_are_checked_too(tmp_path, capsys):
    directory = messy(tmp_path / "p")
    code, out, err = check_run(capsys, directory, directory / "library", directory / "library" / "deeper")
    assert (code, out, err) == (0, "ok: 4 policy files, 4 rules, no errors\n", "")


def test_check_json_lists_the_files_left_out(tmp_path, capsys):
    directory = messy(tmp_path / "p")
    code, out, _ = check_run(capsys, directory, json_format=True)
    report = json.loads(out)
    assert code == 0 and report["ok"]
    assert report["not_loaded"] == [f"{directory}/library/deeper/deep.policy", f"{directory}/library/lib.policy"]
    assert [len(s["files"]) for s in report["sets"]] == [2]


def test_check_of_a_directory_whose_files_are_all_in_subdirectories_says_where_they_are(tmp_path, capsys):
    (tmp_path / "p" / "sub").mkdir(parents=True)
    (tmp_path / "p" / "sub" / "x.policy").write_text("filter x: true\n")
    code, out, err = check_run(capsys, tmp_path / "p")
    assert code == 2 and out == ""
    assert f"no *.policy files in {tmp_path}/p" in err
    assert f"  {tmp_path}/p/sub/x.policy" in err


def test_the_bundled_directory_checks_as_serve_loads_it(capsys):
    code, out, err = check_run(capsys, ROOT / "policies")
    served = load_directories([ROOT / "policies"])
    files, rules = len(served.sources), len(served.rules)
    assert code == 0
    assert out == f"ok: {files} policy files, {rules} rules, no errors\n"
    library = sorted((ROOT / "policies" / "library").glob("*.policy"))
    assert library and all(f"  {p}\n" in err for p in library)


# --------------------------------------------------------------------- the empty set


def reloader(directory, **options) -> PolicyReloader:
    return PolicyReloader([str(directory)], 0, inotify=False, **options)


def test_an_empty_set_is_a_load_error_that_says_what_to_check(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "x.policy").write_text("filter x: true\n")  # in a subdirectory: not the set
    status = reloader(tmp_path).reload_now()
    assert not status.ready and not status.last_reload_ok
    assert status.errors == (
        f"{tmp_path}: no policy file (*.policy) in the policy set: an empty set would let every node fit "
        "and decide nothing, so it is not loaded. Is the ConfigMap mounted with the right keys, and "
        "policy_dirs spelled right? If an empty set is intended, set allow_empty_policy_set: true",)


def test_an_empty_set_after_a_good_one_keeps_the_good_one_and_is_counted_once(tmp_path):
    (tmp_path / "a.policy").write_text("filter a: true\n")
    loader = reloader(tmp_path)
    good = loader.reload_now()
    (tmp_path / "a.policy").unlink()
    for _ in range(3):
        loader.poll()
    status = loader.status
    assert status.ready and status.version == good.version and loader.policy_set.version == good.version
    assert not status.last_reload_ok and status.reloads_failed == 1
    (tmp_path / "b.policy").write_text("filter b: true\n")
    assert loader.poll() and loader.status.last_reload_ok


def test_allow_empty_loads_the_empty_set(tmp_path):
    status = reloader(tmp_path, allow_empty=True).reload_now()
    assert status.ready and status.last_reload_ok and status.files == ()


@pytest.mark.parametrize("given, expected", [({}, False), ({"allow_empty_policy_set": True}, True)])
def test_the_option_reaches_the_reloader(tmp_path, given, expected):
    from policy_extender.config import Config
    from policy_extender.service import Service
    from policy_extender.session.sqlite import SqliteStore
    config = Config(policy_dirs=(str(tmp_path),), reload_interval=0, tally=False, **given)
    service = Service(config, sessions=SqliteStore(str(tmp_path / "s.sqlite")))
    try:
        service.start()
        assert service.reloader.status.ready is expected
    finally:
        service.stop()
