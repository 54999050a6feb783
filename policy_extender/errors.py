"""Every error type of the product: source positions and the errors a policy can produce, with
their rendering; ``EvalError`` (evaluation bounds); ``WireError`` and ``CompactError`` (bodies).

A ``Diagnostic`` says where (a ``Span``), what (``code`` and ``message``) and, when there is one,
how to fix it (``hint``); its ``severity`` is "error" (the set does not load) or "warning" (it
loads; ``check`` shows it, ``check --strict`` fails on it). ``PolicyError`` carries every diagnostic of a failed load and renders
them the way compilers do: ``file:line:col: error[CODE]: message``, the source line and a caret.

Codes: the catalogue in ``lang/codes.py`` (E0xx reading, E1xx syntax, E2xx names and fields, E3xx
types, E4xx rule structure, E5xx bounds), shown in docs/language.md.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Span:
    file: str
    line: int
    column: int
    end_line: int
    end_column: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.column}"


@dataclass(frozen=True)
class Diagnostic:
    code: str
    message: str
    span: Span
    hint: str | None = None
    severity: str = "error"  # or "warning"

    def render(self, source: str | None = None) -> str:
        """``file:line:col: error[CODE]: message`` (``warning[CODE]``), then the source line with a caret."""
        lines = [f"{self.span}: {self.severity}[{self.code}]: {self.message}"]
        lines += _excerpt(self.span, source)
        if self.hint:
            lines.append(f"     = hint: {self.hint}")
        return "\n".join(lines)

    def to_dict(self) -> dict:
        s = self.span
        return {"severity": self.severity, "code": self.code, "message": self.message, "hint": self.hint, "file": s.file,
                "line": s.line, "column": s.column, "end_line": s.end_line, "end_column": s.end_column}


#: Longest source excerpt shown under an error; a longer line is cut to a window around the caret.
EXCERPT_WIDTH = 100


def _excerpt(span: Span, source: str | None) -> list[str]:
    if source is None:
        return []
    all_lines = _lines(source)
    if not 1 <= span.line <= len(all_lines):
        return []
    text = all_lines[span.line - 1].rstrip("\r").expandtabs(1)
    if span.end_line == span.line and span.end_column > span.column:
        width = span.end_column - span.column
    else:
        width = max(1, len(text) - span.column + 1)
    text, start = _window(text, span.column - 1, width)
    width = max(1, min(width, len(text) - start))
    return [f"{span.line:>4} | {text}", f"     | {' ' * start}{'^' * width}"]


@functools.lru_cache(maxsize=8)
def _lines(source: str) -> list[str]:
    """The lines of a source, split once however many of its errors are rendered (a str caches
    its hash, so a repeated lookup costs no pass over the text)."""
    return source.split("\n")


def _window(text: str, start: int, width: int) -> tuple[str, int]:
    """``text`` cut to about EXCERPT_WIDTH characters around ``start``, and ``start`` in the cut."""
    if len(text) <= EXCERPT_WIDTH:
        return text, start
    left = max(0, min(start - EXCERPT_WIDTH // 3, len(text) - EXCERPT_WIDTH))
    cut = text[left:left + EXCERPT_WIDTH]
    prefix = "…" if left > 0 else ""
    suffix = "…" if left + EXCERPT_WIDTH < len(text) else ""
    return prefix + cut + suffix, start - left + len(prefix)


class PolicyError(Exception):
    """A policy set failed to load; ``diagnostics`` holds every problem found, in source order."""

    #: set by lang.parser: the statements of the file that did parse (an ``ast.PolicyFile``)
    partial: Any = None

    def __init__(self, diagnostics: list[Diagnostic], sources: dict[str, str] | None = None):
        self.diagnostics = sorted(diagnostics, key=_order)
        self.sources = dict(sources or {})
        super().__init__(self.render())

    def render(self) -> str:
        return "\n".join(d.render(self.sources.get(d.span.file)) for d in self.diagnostics)

    def to_dicts(self) -> list[dict]:
        return [d.to_dict() for d in self.diagnostics]


def _order(d: Diagnostic) -> tuple:
    return (d.span.file, d.span.line, d.span.column, d.code, d.message)


@dataclass
class EvalError(Exception):
    """A run-time bound was exceeded while evaluating a rule (the only error evaluation raises)."""

    code: str
    message: str
    span: Span | None = None
    rule: str | None = field(default=None)

    def __post_init__(self) -> None:
        super().__init__(str(self))

    def __str__(self) -> str:
        where = f"{self.span}: " if self.span else ""
        rule = f" (rule {self.rule})" if self.rule else ""
        return f"{where}error[{self.code}]: {self.message}{rule}"


# --- the wire layer's errors: a request body we cannot read, a compact test input we cannot expand


class WireError(ValueError):
    """A request body that is not JSON or has a wrong type in a field the policies read.

    ``path`` is a JSONPath-like location in the body (``$.task.Resreq.MilliCPU``); the web layer
    answers HTTP 400 with ``str(error)``.
    """

    def __init__(self, message: str, path: str = "$"):
        super().__init__(f"{path}: {message}")
        self.message = message
        self.path = path


class CompactError(ValueError):
    """A compact fixture value (test input) that cannot be expanded into a wire body.

    ``path`` is where in the compact input (``node.tasks[1].requests.gpu``); the fixture runner
    adds the file and line.
    """

    def __init__(self, path: str, message: str):
        super().__init__(f"{path}: {message}" if path else message)
        self.path = path
        self.message = message
