"""``compile(sources)``: policy files given as {file name: text} → a ``Program`` (the checked
files and their compiled rules), or a ``PolicyError`` carrying every problem of every file."""

from __future__ import annotations

from typing import NamedTuple

from policy_extender.errors import PolicyError
from policy_extender.lang.checker import Checked, check
from policy_extender.lang.compiler import CompiledRule, compile_rules
from policy_extender.lang.parser import parse_file


class Program(NamedTuple):
    checked: Checked              # reads, slots, the kinds that read session data
    rules: list[CompiledRule]     # in file and line order


def compile(sources: dict[str, str]) -> Program:
    """All or nothing: every file parsed, the statements that parsed checked even when others
    did not (so every error is reported at once), then compiled."""
    files, diagnostics = [], []
    for name in sorted(sources):
        try:
            files.append(parse_file(name, sources[name]))
        except PolicyError as err:
            diagnostics.extend(err.diagnostics)
            if getattr(err, "partial", None) is not None:  # the statements that did parse
                files.append(err.partial)
    if diagnostics:
        try:
            check(files)
        except PolicyError as err:
            diagnostics.extend(err.diagnostics)
        raise PolicyError(diagnostics, sources)
    checked = check(files)
    return Program(checked, compile_rules(checked))
