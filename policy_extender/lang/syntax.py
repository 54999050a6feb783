"""What the parser and its slips both read: the Lark parser of grammar/policy.lark (built once per
process, on first use), the words for its tokens, positions (``Locator``: Lark's line/column to a
``Span``) and the scan of reason templates into text and ``{hole}`` s."""

from __future__ import annotations

import functools
import importlib.resources
from pathlib import Path

import lark

from policy_extender.errors import Span

TOKEN_WORDS = {
    "_NL": "the end of the statement", "$END": "the end of the file", "NAME": "name",
    "NUMBER": "number", "QUANTITY": "quantity", "STRING": "string", "KIND": "rule kind",
    "RULE_NAME": "rule name", "CMP": "comparison", "LPAR": "'('", "RPAR": "')'",
    "LSQB": "'['", "RSQB": "']'", "COMMA": "','", "DOT": "'.'", "PROTOCOL": "protocol name",
}


@functools.lru_cache(maxsize=1)
def lark_parser() -> lark.Lark:
    grammar = _grammar_text()
    return lark.Lark(grammar, parser="lalr", lexer="contextual", propagate_positions=True,
                     start=["start", "expr"], maybe_placeholders=True)


def _grammar_text() -> str:
    try:
        return (importlib.resources.files("policy_extender.grammar") / "policy.lark").read_text()
    except ModuleNotFoundError:  # a source checkout that was not pip-installed
        return (Path(__file__).resolve().parents[2] / "grammar" / "policy.lark").read_text()


class Locator:
    """Turns Lark line/column positions into ``Span`` s of a file (shifted for a ``{hole}``)."""

    def __init__(self, file: str, line: int = 1, column: int = 1):
        self.file, self.line, self.column = file, line, column

    def span(self, line: int, column: int, end_line: int, end_column: int) -> Span:
        if line == 1:
            column += self.column - 1
        if end_line == 1:
            end_column += self.column - 1
        return Span(self.file, line + self.line - 1, column, end_line + self.line - 1, end_column)

    def of_meta(self, meta) -> Span:
        return self.span(meta.line, meta.column, meta.end_line, meta.end_column)

    def of_token(self, token) -> Span:
        return self.span(token.line, token.column, token.end_line, token.end_column)


def template_pieces(raw: str):
    """Split a reason template into ("text", start, s) and ("hole", start, expr-source) pieces."""
    i, text_start, buf = 0, 0, []
    while i < len(raw):
        char = raw[i]
        if raw.startswith("{{", i) or raw.startswith("}}", i):
            buf.append(char)
            i += 2
        elif char == "}":
            yield "error", i, "unmatched '}' in reason template"
            return
        elif char == "{":
            end = _hole_end(raw, i + 1)
            if end < 0:
                yield "error", i, "unclosed '{' in reason template"
                return
            yield "text", text_start, "".join(buf)
            yield "hole", i + 1, raw[i + 1:end]
            buf, i, text_start = [], end + 1, end + 1
        else:
            buf.append(raw[i:i + 2] if char == "\\" else char)
            i += 2 if char == "\\" else 1
    yield "text", text_start, "".join(buf)


def _hole_end(raw: str, i: int) -> int:
    quote = None
    while i < len(raw):
        char = raw[i]
        if quote:
            if char == "\\":
                i += 1
            elif char == quote:
                quote = None
        elif char in "\"'":
            quote = char
        elif char == "}":
            return i
        i += 1
    return -1
