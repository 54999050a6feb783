"""``policy-extender check [PATHS]``: lint policy files, as the service would load them.

Each directory's ``*.policy`` files are compiled together (a directory is one policy set, as the
service loads it); a file named directly is compiled with the other files named from its
directory. Exit 0 with a one-line summary, 1 on any error (every error rendered
``file:line:col`` with the source line and a caret), 2 when a path does not exist.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path

from policy_extender.commands import missing_paths

HELP = "lint policy files: every error as file:line:col with the source line and a caret; exit 1 on any error"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="*", default=["policies"], metavar="PATH",
                        help="policy files or directories of *.policy files (default: policies)")
    parser.add_argument("--format", choices=("text", "json"), default="text",
                        help="text for people (default), json for tools")


def run(args: argparse.Namespace) -> int:
    if missing_paths("check", args.paths):
        return 2
    sets = policy_sets(args.paths)
    if not sets:
        print(f"policy-extender check: no *.policy files in {', '.join(args.paths)}", file=sys.stderr)
        return 2
    reports = [check_set(files) for files in sets.values()]
    (_print_json if args.format == "json" else _print_text)(reports)
    return 1 if any(r["diagnostics"] for r in reports) else 0


def policy_sets(paths) -> dict[Path, list[Path]]:
    """Policy files grouped by directory: each group is one policy set."""
    sets: dict[Path, list[Path]] = defaultdict(list)
    for path in map(Path, paths):
        files = sorted(path.rglob("*.policy")) if path.is_dir() else [path]
        for file in files:
            if file not in sets[file.parent]:
                sets[file.parent].append(file)
    return dict(sets)


def check_set(files: list[Path]) -> dict:
    """Compile one set: its files, rule count and version, or every diagnostic."""
    from policy_extender.errors import PolicyError
    from policy_extender.fixtures.exchange import compile_files
    report = {"files": [str(f) for f in files], "rules": 0, "version": None, "diagnostics": [], "rendered": ""}
    try:
        policy_set = compile_files(tuple(files), errors=PolicyError, by_path=True)
    except PolicyError as error:
        report.update(diagnostics=error.to_dicts(), rendered=error.render())
    except OSError as error:
        report.update(diagnostics=[_unreadable(error)], rendered=f"{error.filename}:1:1: error: cannot read: {error.strerror}")
    else:
        report.update(rules=len(policy_set.rules), version=policy_set.version)
    return report


def _unreadable(error: OSError) -> dict:
    return {"code": "E000", "message": f"cannot read: {error.strerror}", "hint": None,
            "file": error.filename, "line": 1, "column": 1, "end_line": 1, "end_column": 1}


def _print_text(reports: list[dict]) -> None:
    errors = sum(len(r["diagnostics"]) for r in reports)
    for report in reports:
        if report["rendered"]:
            print(report["rendered"], file=sys.stderr)
    files = sum(len(r["files"]) for r in reports)
    if errors:
        print(f"{errors} error{'s' * (errors != 1)} in {files} policy file{'s' * (files != 1)}", file=sys.stderr)
    else:
        rules = sum(r["rules"] for r in reports)
        print(f"ok: {files} policy file{'s' * (files != 1)}, {rules} rule{'s' * (rules != 1)}, no errors")


def _print_json(reports: list[dict]) -> None:
    diagnostics = [d for r in reports for d in r["diagnostics"]]
    sets = [{k: r[k] for k in ("files", "rules", "version")} for r in reports]
    print(json.dumps({"ok": not diagnostics, "sets": sets, "diagnostics": diagnostics}, indent=2))
