"""Packaging: every subpackage is listed in setup.cfg, every package_data pattern names a file,
and an installed wheel holds them and finds the grammar."""

import configparser
import os
import pathlib
import subprocess
import sys
import zipfile

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent


def _setup_cfg() -> configparser.ConfigParser:
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "setup.cfg")
    return cfg


def _listed_packages():
    cfg = _setup_cfg()
    return {p.strip() for p in cfg["options"]["packages"].split() if p.strip()}


def _package_data() -> dict[str, set[str]]:
    """setup.cfg's package_data, each pattern resolved to the files it matches, as paths in the
    installed tree (``policy_extender/grammar/policy.lark``)."""
    cfg = _setup_cfg()
    package_dir = {
        package.strip(): directory.strip()
        for package, directory in (line.split("=") for line in cfg["options"]["package_dir"].splitlines() if line.strip())
    }
    matches = {}
    for package, patterns in cfg["options.package_data"].items():
        source = ROOT / package_dir.get(package, package.replace(".", "/"))
        installed = package.replace(".", "/")
        for pattern in patterns.split(","):
            pattern = pattern.strip()
            matches[f"{package}: {pattern}"] = {f"{installed}/{f.relative_to(source).as_posix()}"
                                                for f in source.glob(pattern) if f.is_file()}
    return matches


def test_every_subpackage_is_listed_in_setup_cfg():
    on_disk = {
        ".".join(init.parent.relative_to(ROOT).parts)
        for init in (ROOT / "policy_extender").rglob("__init__.py")
    }
    assert on_disk | {"policy_extender.grammar"} == _listed_packages()


def test_every_package_data_pattern_matches_a_file():
    """A pattern that matches nothing promises a file the package does not have."""
    empty = [pattern for pattern, files in _package_data().items() if not files]
    assert not empty, f"setup.cfg package_data patterns that match no file: {empty}"
    assert "policy_extender/grammar/policy.lark" in set().union(*_package_data().values())


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
    # the data files are exactly what package_data names, each of them shipped
    data = {n for n in names if n.startswith("policy_extender/") and not n.endswith(".py")}
    assert data == set().union(*_package_data().values())

    # the installed code (not this checkout) compiles a policy with the grammar it ships
    installed = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(installed)
    out = subprocess.run(
        [sys.executable, "-c",
         "import policy_extender; from policy_extender.policyset import compile_sources; "
         "compile_sources({'a.policy': 'filter zone: node.labels.zone == \"a\"\\n'}); "
         "print(policy_extender.__file__)"],
        env={**os.environ, "PYTHONPATH": str(installed)}, cwd=tmp_path,
        capture_output=True, text=True, check=True)
    assert out.stdout.strip() == str(installed / "policy_extender" / "__init__.py")
