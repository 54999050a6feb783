"""Positions: the protocol's (0-based line, UTF-16 character) and the checker's ``Span``
(1-based line and column, in characters); and the expression node under a position."""

from __future__ import annotations

import re

from lsprotocol import types as lsp

from policy_extender.errors import Span
from policy_extender.lang import ast


def utf16_column(line_text: str, column: int) -> int:
    """The UTF-16 offset of the 0-based character index ``column`` of ``line_text``."""
    prefix = line_text[:column]
    return column + sum(1 for ch in prefix if ord(ch) > 0xFFFF)


def char_column(line_text: str, character: int) -> int:
    """The character index of the UTF-16 offset ``character`` of ``line_text``."""
    units = 0
    for index, ch in enumerate(line_text):
        if units >= character:
            return index
        units += 2 if ord(ch) > 0xFFFF else 1
    return len(line_text)


def line_of(text: str, number: int) -> str:
    """Line ``number`` (0-based) of ``text``, or '' past its end."""
    lines = text.split("\n")
    return lines[number] if 0 <= number < len(lines) else ""


def to_range(span: Span, text: str) -> lsp.Range:
    """The protocol's range of ``span`` in ``text`` (an empty span is widened to one character)."""
    start_line, end_line = span.line - 1, max(span.end_line, span.line) - 1
    start = utf16_column(line_of(text, start_line), span.column - 1)
    end = utf16_column(line_of(text, end_line), max(span.end_column - 1, 0))
    if (end_line, end) <= (start_line, start):
        end_line, end = start_line, start + 1
    return lsp.Range(lsp.Position(max(start_line, 0), start), lsp.Position(max(end_line, 0), end))


def to_line_column(position: lsp.Position, text: str) -> tuple[int, int]:
    """The 1-based (line, column) of a protocol position in ``text``."""
    return position.line + 1, char_column(line_of(text, position.line), position.character) + 1


def contains(span: Span, line: int, column: int) -> bool:
    """Whether the 1-based (line, column) lies in ``span`` (its end included: a cursor just
    after a name is on it)."""
    if (line, column) < (span.line, span.column):
        return False
    return (line, column) <= (span.end_line, span.end_column)


def _is_node(value: object) -> bool:
    return hasattr(value, "span") and not isinstance(value, Span)


def expressions(statement) -> list:
    """Every expression node of a statement, outermost first (a rule's, its modifiers', a
    reason template's holes, a let's, a guard's)."""
    found: list = []

    def walk(node) -> None:
        if isinstance(node, ast.Template):
            for part in node.parts:
                if _is_node(part):
                    walk(part)
            return
        found.append(node)
        for child in ast.children(node):
            walk(child)

    roots: list = []
    if isinstance(statement, ast.RuleStatement):
        roots.append(statement.expr)
        for modifier in statement.modifiers:
            value = modifier.value
            items = value if isinstance(value, tuple) else (value,)
            roots += [v for v in items if _is_node(v) or isinstance(v, ast.Template)]
    elif isinstance(statement, (ast.Let, ast.Guard)) and statement.expr is not None:
        roots.append(statement.expr)
    for root in roots:
        walk(root)
    return found


def statement_at(file: ast.PolicyFile, line: int):
    """The statement whose lines hold ``line`` (1-based), or None."""
    for statement in file.statements:
        if statement.span.line <= line <= statement.span.end_line:
            return statement
    return None


def node_at(file: ast.PolicyFile, line: int, column: int):
    """The innermost expression node at (line, column), or None; a field access counts as the
    node only on its field name (on ``node`` in ``node.labels`` the node is the name ``node``)."""
    statement = statement_at(file, line)
    if statement is None:
        return None
    best = None
    for node in expressions(statement):
        where = node.name_span if isinstance(node, ast.FieldAccess) else (
            node.func_span if isinstance(node, ast.Call) else node.span)
        if isinstance(node, (ast.FieldAccess, ast.Call, ast.Name)) and contains(where, line, column):
            if best is None or _width(where) <= _width(_where(best)):
                best = node
    return best


def _where(node) -> Span:
    if isinstance(node, ast.FieldAccess):
        return node.name_span
    return node.func_span if isinstance(node, ast.Call) else node.span


def _width(span: Span) -> tuple[int, int]:
    return span.end_line - span.line, span.end_column - span.column


_DEFINED = re.compile(r"(?:shared[ \t]+)?(?:let|param)[ \t]+([A-Za-z_][A-Za-z0-9_]*)")


def name_span(statement, source: str) -> Span | None:
    """Where a let's or param's name is written."""
    if isinstance(statement, ast.Param):
        return statement.name_span
    if not isinstance(statement, ast.Let):
        return None
    span = statement.span
    text = line_of(source, span.line - 1)[span.column - 1:]
    named = _DEFINED.match(text)
    if named is None:
        return None
    column = span.column + named.start(1)
    return Span(span.file, span.line, column, span.line, column + len(statement.name))


def spans_equal_text(span: Span, source: str, text: str) -> bool:
    """Whether ``span`` (one line) covers exactly ``text`` in ``source``."""
    if span.line != span.end_line:
        return False
    return line_of(source, span.line - 1)[span.column - 1:span.end_column - 1] == text

