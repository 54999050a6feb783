"""``compile(sources)``: policy files given as {file name: text} → a ``Program`` (the checked
files and their compiled rules), or a ``PolicyError`` carrying every problem of every file."""

from __future__ import annotations

from typing import NamedTuple

from policy_extender.errors import PolicyError
from policy_extender.lang import cost
from policy_extender.lang.checker import Checked, check
from policy_extender.lang.compiler import CompiledRule, compile_rules
from policy_extender.lang.cost import Cost
from policy_extender.lang.parser import parse_file
from policy_extender.lang.values import Setting, is_values_file, read_values


class Program(NamedTuple):
    checked: Checked              # reads, slots, the kinds that read session data
    rules: list[CompiledRule]     # in file and line order
    costs: tuple[Cost, ...] = ()  # each rule's estimated cost per call (lang.cost), in rule order


def compile(sources: dict[str, str]) -> Program:
    """All or nothing: every file parsed (a values file read: ``lang.values``), the statements that parsed checked even when others
    did not (so every error is reported at once), then compiled."""
    files, diagnostics = [], []
    settings: list[Setting] = []
    for name in sorted(sources):
        if is_values_file(name):  # the values of the set's parameters (lang.values)
            try:
                settings += read_values(name, sources[name])
            except PolicyError as err:
                diagnostics.extend(err.diagnostics)
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
    checked.warnings = (*checked.warnings, *cost.warnings(checked))  # W501: a rule quadratic in the cluster
    return Program(checked, compile_rules(checked), tuple(cost.estimates(checked)))
