"""The CLI: lazy subcommands, serve's flags for every option, ``python -m policy_extender``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from policy_extender import cli, config
from policy_extender.commands import COMMANDS

REPO = Path(__file__).parents[2]


def test_every_present_command_module_has_the_interface():
    for name in COMMANDS:
        module = cli.load_command(name)
        if module is not None:
            assert isinstance(module.HELP, str) and callable(module.add_arguments) and callable(module.run)


def test_a_missing_command_module_is_skipped(monkeypatch):
    monkeypatch.setattr(cli, "COMMANDS", ["serve", "no_such_command"])
    parser = cli.build_parser()
    assert "serve" in parser.format_help() and "no_such_command" not in parser.format_help()


@pytest.mark.slow
def test_serve_has_a_flag_per_option_and_check_mode(tmp_path):
    parser = cli.build_parser()
    args = parser.parse_args(["serve", "--workers", "3", "--verbs", "predicate=customFilter"])
    assert args.workers == "3" and args.verbs == "predicate=customFilter"
    help_text = subprocess.run([sys.executable, "-m", "policy_extender", "serve", "--help"],
                               capture_output=True, text=True, cwd=REPO, check=True).stdout
    for option in config.OPTIONS:
        assert config.flag_name(option.name) in help_text


@pytest.mark.slow
def test_serve_check_reports_a_bad_config_with_status_2(tmp_path):
    result = subprocess.run([sys.executable, "-m", "policy_extender", "serve", "--workers", "x", "--check"],
                            capture_output=True, text=True, cwd=REPO)
    assert result.returncode == 2 and "flag --workers" in result.stderr


@pytest.mark.slow
def test_no_command_prints_help_and_fails():
    result = subprocess.run([sys.executable, "-m", "policy_extender"], capture_output=True, text=True, cwd=REPO)
    assert result.returncode == 2 and "COMMAND" in result.stderr
