"""Compiling policy files into a ``decide.policy_set.PolicySet``.

``compile_sources({"zone.policy": text})`` parses, checks and compiles every file (all errors or
nothing), and ``load_directories([...])`` reads ``*.policy`` files the way a ConfigMap volume
presents them.
"""

from __future__ import annotations

from pathlib import Path

from policy_extender.errors import Diagnostic, PolicyError, Span
from policy_extender.decide.policy_set import PolicySet
from policy_extender.lang.checker import check
from policy_extender.lang.compiler import compile_rules
from policy_extender.lang.parser import parse_file


def compile_sources(sources: dict[str, str]) -> "PolicySet":
    """Compile policy files given as {file name: text}; raises PolicyError with every problem."""
    files, diagnostics = [], []
    for name in sorted(sources):
        try:
            files.append(parse_file(name, sources[name]))
        except PolicyError as err:
            diagnostics.extend(err.diagnostics)
            if getattr(err, "partial", None) is not None:  # the statements that did parse
                files.append(err.partial)
    if diagnostics:  # still check the statements that parsed, so every error is reported at once
        try:
            check(files)
        except PolicyError as err:
            diagnostics.extend(err.diagnostics)
        raise PolicyError(diagnostics, sources)
    return PolicySet(sources, compile_rules_of(files))


def compile_rules_of(files):
    checked = check(files)
    return checked, compile_rules(checked)


def load_directories(paths) -> "PolicySet":
    """Compile the ``*.policy`` files of each directory (hidden entries and ``..data`` skipped)."""
    sources: dict[str, str] = {}
    seen: dict[str, Path] = {}
    duplicates = []
    for path in map(Path, paths):
        for file in _policy_files(path):
            if file.name in seen:
                duplicates.append(Diagnostic("E407", f"{file.name} is in both {seen[file.name].parent} and "
                                             f"{file.parent}", Span(file.name, 1, 1, 1, 1), "rename one of them"))
                continue
            seen[file.name] = file
            sources[file.name] = file.read_text(encoding="utf-8")
    if duplicates:
        raise PolicyError(duplicates, sources)
    return compile_sources(sources)


def _policy_files(path: Path) -> list[Path]:
    if path.is_file():
        return [path]
    return [p for p in sorted(path.iterdir())
            if not p.name.startswith(".") and p.name.endswith(".policy") and p.is_file()]


