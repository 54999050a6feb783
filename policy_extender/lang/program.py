"""``compile(sources)``: policy files given as {file name: text} → a ``Program`` (the checked
files and their compiled rules), or a ``PolicyError`` carrying every problem of every file.

``analyse(sources)`` is the same front half (read, parse, check) that never raises: what an
editor needs while a file is half written (every diagnostic, the statements that did parse, and
the checker's types and names of what it reached), and what ``compile`` itself runs first."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

from policy_extender.errors import Diagnostic, PolicyError, Span
from policy_extender.lang import ast, codes, cost, enqueue_reads
from policy_extender.lang.checker import Checked, Checker
from policy_extender.lang.compiler import CompiledRule, compile_rules
from policy_extender.lang.cost import Cost
from policy_extender.lang.parser import parse_file
from policy_extender.lang.values import Setting, is_values_file, read_values


class Program(NamedTuple):
    checked: Checked              # reads, slots, the kinds that read session data
    rules: list[CompiledRule]     # in file and line order
    costs: tuple[Cost, ...] = ()  # each rule's estimated cost per call (lang.cost), in rule order


@dataclass
class Analysis:
    """A set read, parsed and checked, whatever its errors."""
    sources: dict[str, str]
    files: list[ast.PolicyFile]                 # every policy file, the statements that parsed
    settings: list[Setting]                     # the values file's
    checker: Checker                            # its types and names of every expression reached
    checked: Checked | None                     # None when any file has an error
    #: every error (parse, values and check: all of them at once) and, when it checks, the warnings
    diagnostics: list[Diagnostic] = field(default_factory=list)

    @property
    def errors(self) -> list[Diagnostic]:
        return [d for d in self.diagnostics if d.severity == "error"]


def analyse(sources: dict[str, str], memo: dict | None = None) -> Analysis:
    """Every file parsed (a values file read: ``lang.values``), the statements that parsed checked
    even when others did not, so every error is reported at once. ``memo`` (a dict the caller
    keeps) holds each file's parse by its name and text, so an editor that changed one file of a
    set parses that file alone (the tree is immutable; checking is a fraction of parsing)."""
    files: list[ast.PolicyFile] = []
    diagnostics: list[Diagnostic] = []
    warnings: list[Diagnostic] = []
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
        parsed = _parse(name, sources[name], memo)
        if isinstance(parsed, PolicyError):
            diagnostics.extend(parsed.diagnostics)
            if getattr(parsed, "partial", None) is not None:  # the statements that did parse
                files.append(parsed.partial)
        else:
            files.append(parsed)
    checker = Checker(files, settings)
    checked = None
    try:
        checked = checker.run()
    except PolicyError as err:
        diagnostics.extend(err.diagnostics)
    if diagnostics:
        checked = None
    elif checked is not None:
        # W001 first, then the checker's, then W401 (an enqueue rule sizing a pod-less job by its
        # pods), then W501: a rule quadratic in the cluster
        checked.warnings = (*warnings, *checked.warnings, *enqueue_reads.warnings(checked), *cost.warnings(checked))
        diagnostics.extend(checked.warnings)
    return Analysis(sources, files, settings, checker, checked, diagnostics)


def _parse(name: str, text: str, memo: dict | None) -> ast.PolicyFile | PolicyError:
    key = (name, text)
    if memo is not None and key in memo:
        return memo[key]
    try:
        parsed: ast.PolicyFile | PolicyError = parse_file(name, text)
    except PolicyError as err:
        parsed = err
    if memo is not None:
        if len(memo) > 256:  # an editor's session: old texts of the files go
            memo.clear()
        memo[key] = parsed
    return parsed


def compile(sources: dict[str, str], probe=None) -> Program:
    """All or nothing: ``analyse``, then, when nothing is wrong, compiled (``probe``: a
    ``lang.probe.Probe`` for expression coverage, the fixture runner's)."""
    analysis = analyse(sources)
    if analysis.checked is None:  # with the values files' text, for their excerpts
        raise PolicyError(analysis.errors, sources)
    checked = analysis.checked
    return Program(checked, compile_rules(checked, probe), tuple(cost.estimates(checked)))


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
