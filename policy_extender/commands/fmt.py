"""``policy-extender fmt [--check] PATHS``: rewrite policy files in the one canonical layout.

The layout is docs/language.md's "Layout" section (``policy_extender.lang.formatter``): the
formatted file parses to the same program, keeps every comment, and formatting it again changes
nothing. ``--check`` rewrites nothing: it prints a unified diff for each file that is not
formatted and exits 1 (for CI). A file with a syntax error is left alone: its errors are printed
and the exit status is 2.
"""

from __future__ import annotations

import argparse
import difflib
import sys
from pathlib import Path

from policy_extender.commands import missing_paths

HELP = "rewrite policy files in the canonical layout; --check prints a diff and exits 1 when a file is not formatted"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="+", metavar="PATH",
                        help="policy files, or directories whose policy set is formatted (the *.policy files "
                             "directly in them, as serve loads them: not their subdirectories)")
    parser.add_argument("--check", action="store_true",
                        help="change nothing: print a diff for each file that is not formatted and exit 1 if any")


def run(args: argparse.Namespace) -> int:
    from policy_extender.errors import PolicyError  # lazy: commands/__init__
    from policy_extender.lang.formatter import format_source

    if missing_paths("fmt", args.paths):
        return 2
    files = policy_files(args.paths)
    if not files:
        print(f"policy-extender fmt: no *.policy files in {', '.join(args.paths)}", file=sys.stderr)
        return 2
    unformatted, broken = [], []
    for file in files:
        source = file.read_text(encoding="utf-8")
        try:
            formatted = format_source(str(file), source)
        except PolicyError as error:
            print(error.render(), file=sys.stderr)
            broken.append(file)
            continue
        if formatted == source:
            continue
        unformatted.append(file)
        if args.check:
            sys.stdout.writelines(difflib.unified_diff(source.splitlines(keepends=True), formatted.splitlines(keepends=True),
                                                       f"{file}", f"{file} (formatted)"))
        else:
            file.write_text(formatted, encoding="utf-8")
    _summary(args.check, files, unformatted, broken)
    if broken:
        return 2
    return 1 if args.check and unformatted else 0


def policy_files(paths) -> list[Path]:
    """The files named, and the policy set of each directory named (``policyset.files.set_files``)."""
    from policy_extender.policyset import SUFFIXES  # lazy: commands/__init__
    from policy_extender.lang.values import is_values_file
    from policy_extender.policyset.files import set_files
    files: list[Path] = []
    for path in map(Path, paths):
        found = [path / name for name in set_files(str(path), SUFFIXES)
                 if not is_values_file(name)] if path.is_dir() else [path]  # a values file is YAML
        files += [f for f in found if f not in files]
    return files


def _summary(check: bool, files, unformatted, broken) -> None:
    done = "would reformat" if check else "reformatted"
    parts = [f"{len(unformatted)} {done}", f"{len(files) - len(unformatted) - len(broken)} already formatted"]
    if broken:
        parts.append(f"{len(broken)} not formatted: syntax errors")
    print(f"fmt: {len(files)} policy file{'s' if len(files) != 1 else ''}: {', '.join(parts)}", file=sys.stderr)
