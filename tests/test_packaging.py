"""Packaging: every subpackage is listed in setup.cfg and an installed wheel finds the grammar."""

import configparser
import pathlib
import subprocess
import sys
import zipfile

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent


def _listed_packages():
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "setup.cfg")
    return {p.strip() for p in cfg["options"]["packages"].split() if p.strip()}


def test_every_subpackage_is_listed_in_setup_cfg():
    on_disk = {
        ".".join(init.parent.relative_to(ROOT).parts)
        for init in (ROOT / "policy_extender").rglob("__init__.py")
    }
    assert on_disk | {"policy_extender.grammar"} == _listed_packages()


@pytest.mark.slow
def test_wheel_ships_grammar_and_defaults(tmp_path):
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path), str(ROOT)],
        check=True,
    )
    (wheel,) = tmp_path.glob("policy_extender-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert "policy_extender/grammar/policy.lark" in names
    assert "policy_extender/schema.py" in names
