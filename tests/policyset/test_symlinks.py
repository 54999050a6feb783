"""A policy file that is a symbolic link out of its directory is refused, never read, and its target
never shown (``policyset/files.py``, ``check_inside``); a ConfigMap volume's links (``name ->
..data/name``, ``..data -> ..2026_…``) stay inside it and keep working through a real ``..data``
swap."""

from __future__ import annotations

import argparse
import os

import pytest

from policy_extender.commands import check
from policy_extender.policyset.compile import SUFFIXES
from policy_extender.policyset.files import OutsideDirectory, read_snapshot, set_files
from policy_extender.policyset.reload import PolicyReloader

from .kubelet import ConfigMapVolume

SECRET = "filter leaked: node.name == \"the-secret-text\"\n"


def reloader(directory) -> PolicyReloader:
    return PolicyReloader([str(directory)], 0, inotify=False)


@pytest.fixture
def outside(tmp_path):
    """A policy file outside the policy directory, where a link may point."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "secret.policy").write_text(SECRET)
    return elsewhere / "secret.policy"


def test_a_configmap_volume_keeps_working_through_a_real_data_swap(tmp_path):
    volume = ConfigMapVolume(str(tmp_path / "policies"))
    volume.update({"zone.policy": "filter zone: true\n"})
    assert os.path.islink(tmp_path / "policies" / "zone.policy")  # zone.policy -> ..data/zone.policy
    loader = reloader(tmp_path / "policies")
    first = loader.reload_now()
    assert first.ready and first.files == ("zone.policy",)
    seen = []
    volume.update({"zone.policy": "filter zone: node.name != \"\"\n", "new.policy": "filter new: true\n"},
                  between=lambda step: seen.append(read_snapshot([str(tmp_path / "policies")], SUFFIXES).files))
    assert all(files for files in seen)  # every intermediate state reads, none refused
    assert loader.poll()
    status = loader.status
    assert status.last_reload_ok and status.files == ("new.policy", "zone.policy") and status.version != first.version


def test_a_link_out_of_the_directory_is_refused_not_read_and_not_echoed(tmp_path, outside):
    policies = tmp_path / "policies"
    policies.mkdir()
    (policies / "good.policy").write_text("filter good: true\n")
    (policies / "evil.policy").symlink_to(outside)
    with pytest.raises(OutsideDirectory) as refused:
        read_snapshot([str(policies)], SUFFIXES)
    message = str(refused.value)
    assert message == (f"{policies / 'evil.policy'}: a symbolic link to a file outside {policies}: refused, "
                       "not read; put the policy file itself in the directory (a ConfigMap volume's links "
                       "into its ..data are fine)")
    assert str(outside.parent) not in message and "the-secret-text" not in message
    with pytest.raises(OutsideDirectory):
        set_files(str(policies), SUFFIXES)  # check, fmt, the fixture runner list files here


def test_serve_keeps_its_last_good_set_and_shows_no_target(tmp_path, outside):
    policies = tmp_path / "policies"
    policies.mkdir()
    (policies / "good.policy").write_text("filter good: true\n")
    loader = reloader(policies)
    good = loader.reload_now()
    (policies / "evil.policy").symlink_to(outside)
    loader.poll()
    status = loader.status
    assert status.ready and status.version == good.version and not status.last_reload_ok
    shown = " ".join(status.errors)
    assert "evil.policy: a symbolic link to a file outside" in shown
    assert str(outside.parent) not in shown and "the-secret-text" not in shown


def test_a_data_link_out_of_the_directory_is_refused(tmp_path, outside):
    policies = tmp_path / "policies"
    policies.mkdir()
    (policies / "..data").symlink_to(outside.parent)
    (policies / "secret.policy").symlink_to("..data/secret.policy")
    with pytest.raises(OutsideDirectory) as refused:
        read_snapshot([str(policies)], SUFFIXES)
    assert "..data: a symbolic link to a file outside" in str(refused.value)
    assert str(outside.parent) not in str(refused.value)


def test_a_link_within_the_directory_and_a_named_file_are_read(tmp_path, outside):
    policies = tmp_path / "policies"
    (policies / "sub").mkdir(parents=True)
    (policies / "sub" / "real.policy").write_text("filter real: true\n")
    (policies / "alias.policy").symlink_to("sub/real.policy")
    assert read_snapshot([str(policies)], SUFFIXES).files == {"alias.policy": b"filter real: true\n"}
    named = policies / "named.policy"
    named.symlink_to(outside)
    with pytest.raises(OutsideDirectory):  # a file named alone: its own directory is the bound
        read_snapshot([str(named)], SUFFIXES)


def test_check_reports_the_refusal_without_the_target(tmp_path, outside, capsys):
    policies = tmp_path / "policies"
    policies.mkdir()
    (policies / "evil.policy").symlink_to(outside)
    code = check.run(argparse.Namespace(paths=[str(policies)], format="text", strict=False))
    out, err = capsys.readouterr()
    assert code != 0
    assert "evil.policy: a symbolic link to a file outside" in out + err
    assert "the-secret-text" not in out + err and str(outside.parent) not in out + err
