"""Expression-level coverage (``policy-extender test --coverage``), like OPA's: a ``Probe`` given
to ``lang.compile`` makes the compiler wrap each rule's guard (its file guard and ``when``s
together) and each operand of every ``and`` and ``or`` so that evaluating them records the
outcome. Only the fixture runner compiles with a probe; the served set never has one, so the hot
path is untouched.

An operand is covered when it has been both true and false; one never evaluated (the right side of
an ``and`` whose left was never true) is reported as such. A rule whose guard never held was never
tested by any case: its outcomes say nothing.
"""

from __future__ import annotations

from typing import Any, Callable

Fn = Callable[[Any], Any]


class Probe:
    """What the cases evaluated: {(file, line, column, end line, end column): (source, outcomes)}."""

    def __init__(self) -> None:
        #: operand of an ``and``/``or`` -> (its source, the outcomes seen: True and/or False)
        self.operands: dict[tuple, tuple[str, set[bool]]] = {}
        #: rule (file, line, column) -> the outcomes of its guard
        self.guards: dict[tuple, set[bool]] = {}

    def operand(self, span, source: str, fn: Fn) -> Fn:
        key = (span.file, span.line, span.column, span.end_line, span.end_column)
        seen = self.operands.setdefault(key, (source, set()))[1]

        def probed(c):
            value = fn(c)
            seen.add(value is True)
            return value
        return probed

    def guard(self, rule_key: tuple, fn: Fn) -> Fn:
        seen = self.guards.setdefault(rule_key, set())

        def probed(c):
            value = fn(c)
            seen.add(value is True)
            return value
        return probed
