"""``compile(sources)``: policy files given as {file name: text} → a ``Program`` (the checked
files and their compiled rules), or a ``PolicyError`` carrying every problem of every file."""

from __future__ import annotations

from typing import NamedTuple

from policy_extender.errors import Diagnostic, PolicyError, Span
from policy_extender.lang import codes
from policy_extender.lang.checker import Checked, check
from policy_extender.lang.compiler import CompiledRule, compile_rules
from policy_extender.lang.parser import parse_file
from policy_extender.lang.values import Setting, is_values_file, read_values


class Program(NamedTuple):
    checked: Checked              # reads, slots, the kinds that read session data
    rules: list[CompiledRule]     # in file and line order


def compile(sources: dict[str, str], probe=None) -> Program:
    """All or nothing (``probe``: a ``lang.probe.Probe`` for expression coverage): every file parsed (a values file read: ``lang.values``), the statements that parsed checked even when others
    did not (so every error is reported at once), then compiled."""
    files, diagnostics, warnings = [], [], []
    settings: list[Setting] = []
    values_files = [name for name in sorted(sources) if is_values_file(name)]
    if len(values_files) > 1:
        diagnostics.append(_two_values_files(values_files))
    for name in sorted(sources):
        if is_values_file(name):  # the values of the set's parameters (lang.values)
            try:
                read = read_values(name, sources[name])
            except PolicyError as err:
                diagnostics.extend(err.diagnostics)
                continue
            settings += read
            if not read:
                warnings.append(_empty_values_file(name))
            continue
        try:
            files.append(parse_file(name, sources[name]))
        except PolicyError as err:
            diagnostics.extend(err.diagnostics)
            if getattr(err, "partial", None) is not None:  # the statements that did parse
                files.append(err.partial)
    if diagnostics:
        try:
            check(files, settings)
        except PolicyError as err:
            diagnostics.extend(err.diagnostics)
        raise PolicyError(diagnostics, sources)
    try:
        checked = check(files, settings)
    except PolicyError as err:  # with the values files' text, for their excerpts
        raise PolicyError(err.diagnostics, sources) from None
    if warnings:
        checked.warnings = (*warnings, *checked.warnings)
    return Program(checked, compile_rules(checked, probe))


def _two_values_files(names: list[str]) -> Diagnostic:
    """E002 at the second values file: one set, one values file (``policyset.sets``)."""
    return Diagnostic(codes.E002, f"the set holds {len(names)} values files: {' and '.join(names)}; "
                      "one set takes one values file", Span(names[1], 1, 1, 1, 1),
                      "keep the values of one cluster per set: move the others out of the policy "
                      "directory and name the one to use with --values FILE (serve: values_file)")


def _empty_values_file(name: str) -> Diagnostic:
    return Diagnostic(codes.W001, "the values file sets nothing: every parameter keeps its default",
                      Span(name, 1, 1, 1, 1), "set the cluster's values in it (policy.param: value), "
                      "or leave the file out of the set", severity="warning")
