"""format: a policy file in the one canonical layout (``policy-extender fmt``), comments kept.

The layout (docs/language.md, "Layout"):

* a statement starts at column 1 and its head (``kind name: expression``, ``let name = ...``,
  ``when ...``) is one line, unless longer than WIDTH: then it is broken before each operator
  of its top-level ``and``/``or`` (or ``+``/``-``) chain, or before the ``for``/``if`` of an
  aggregate or the ``then``/``else`` of an ``if``, continuation lines 8 deeper; each modifier is on
  its own line, indented 4 spaces, in the order written, and wrapped the same way;
* expressions are printed from the AST: one space around binary operators and after commas, no
  space inside brackets, parentheses only where precedence needs them, no trailing commas;
  numbers, strings and reason templates are kept exactly as written;
* blank lines: at most one between statements (kept where the author put one), none inside a
  statement, none at the start; the file ends with one newline;
* comments: a comment on its own line stays before the statement or modifier it precedes (at
  its indentation); a comment at the end of the last line of a statement head or modifier stays
  at its end, two spaces after the code; other comments written inside one are moved above it;
  an indented comment after a rule's last modifier stays with the rule.

Every statement and modifier kind is printed by one entry of ``STATEMENTS`` / ``MODIFIERS``;
every expression node by one ``_expr_<Node>`` function.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, fields
from typing import Callable

from policy_extender.errors import Span
from policy_extender.lang import ast
from policy_extender.lang.parser import number_literal, parse_file, quantity_literal

INDENT = "    "
CONTINUATION = " " * 8  # a wrapped line's continuation, 8 deeper than the line it continues
WIDTH = 100             # a statement head or modifier longer than this is wrapped where it can be

#: Strings (kept whole) and comments: how a comment is told from a '#' inside a string.
_STRING_OR_COMMENT = re.compile(r'"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'|#[^\n]*')
_NUMBER_TEXT = re.compile(r"[0-9]+(\.[0-9]+)?([eE][+-]?[0-9]+|Ki|Mi|Gi|Ti|Pi|Ei|m|k|M|G|T|P|E)?")


def format_source(name: str, source: str) -> str:
    """``source`` in the canonical layout; raises ``PolicyError`` when it does not parse."""
    return Formatter(parse_file(name, source)).text()


# --- comments ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Comment:
    line: int
    column: int
    text: str
    own_line: bool  # nothing but blanks before it on its line


def comments_of(source: str) -> list[Comment]:
    found = []
    for number, line in enumerate(source.split("\n"), start=1):
        for match in _STRING_OR_COMMENT.finditer(line):
            if match.group().startswith("#"):
                own = not line[:match.start()].strip()
                found.append(Comment(number, match.start() + 1, match.group().rstrip(), own))
    return found


# --- statements ----------------------------------------------------------------------------------

@dataclass
class Element:
    """One printed line: a statement head or a modifier, with the source lines it came from."""
    code: str
    indent: str
    first: int
    last: int
    leading: list = field(default_factory=list)  # comment lines printed before it
    inside: list = field(default_factory=list)   # comments written within its source lines
    trailing: str = ""                           # a comment printed at its end


class Formatter:
    def __init__(self, file: ast.PolicyFile):
        self.file = file
        self.lines = file.source.split("\n")

    def text(self) -> str:
        """Top-level items (comments and statements) in source order, a blank line between two
        items wherever the source has one."""
        comments = comments_of(self.file.source)
        used: set[int] = set()
        items: list[tuple[int, int, list[str]]] = []  # (first source line, last source line, lines)
        for statement in self.file.statements:
            lines, last = self.statement(statement, comments, used)
            items.append((statement.span.line, last, lines))
        items += [(c.line, c.line, [c.text]) for c in comments if id(c) not in used]
        items.sort(key=lambda item: item[0])
        out: list[str] = []
        for i, (first, _last, lines) in enumerate(items):
            if i and self._has_blank(items[i - 1][1], first):
                out.append("")
            out += lines
        return "\n".join(out) + "\n" if out else ""

    def statement(self, statement, comments: list[Comment], used: set) -> tuple[list[str], int]:
        """The printed lines of one statement, with the comments inside it and its indented tail."""
        elements = self.elements(statement)
        first, last = statement.span.line, statement.span.end_line
        for c in comments:
            if not first <= c.line <= last:
                continue
            used.add(id(c))
            owner = next((e for e in reversed(elements) if e.first <= c.line <= e.last), None)
            if owner is None:  # between two elements: before the next one
                owner = next(e for e in elements if e.first > c.line)
                owner.leading.append(c.text)
            else:
                owner.inside.append(c)
        lines = []
        for element in elements:
            inside = element.inside
            if len(inside) == 1 and inside[0].line == element.last and not inside[0].own_line:
                element.trailing = inside[0].text  # at the end of its last line: stays there
            else:
                element.leading += [c.text for c in inside]
            lines += [element.indent + text for text in element.leading]
            lines += [element.indent + text for text in element.code.split("\n")]
            if element.trailing:
                lines[-1] += f"  {element.trailing}"
        for c in comments:  # indented comment lines right after the statement stay with it
            if c.line == last + 1 and c.own_line and c.column > 1 and id(c) not in used:
                used.add(id(c))
                lines.append(INDENT + c.text)
                last += 1
        return lines, last

    def _has_blank(self, after: int, before: int) -> bool:
        """A blank line strictly between source lines ``after`` and ``before``."""
        return any(not self.lines[n - 1].strip() for n in range(after + 1, before) if 0 < n <= len(self.lines))

    def elements(self, statement) -> list["Element"]:
        is_rule = isinstance(statement, ast.RuleStatement)
        head_last = statement.expr.span.end_line if is_rule else statement.span.end_line
        head = STATEMENTS.get(type(statement), Formatter.as_written)
        out = [Element(head(self, statement), "", statement.span.line, head_last)]
        for modifier in getattr(statement, "modifiers", ()):
            printer = MODIFIERS.get(modifier.kind, Formatter.as_written)
            out.append(Element(printer(self, modifier), INDENT, modifier.span.line, modifier.span.end_line))
        return out

    def as_written(self, node) -> str:
        """A statement or modifier kind without an entry in the tables below: its source text,
        comments taken out and lines joined (strings never span lines, so none is changed)."""
        keep = lambda m: "" if m.group().startswith("#") else m.group()  # noqa: E731 - a one-line re.sub callback
        lines = (_STRING_OR_COMMENT.sub(keep, line).strip() for line in self.source_text(node.span).split("\n"))
        return " ".join(line for line in lines if line)

    # statement heads
    def rule(self, rule: ast.RuleStatement) -> str:
        name = f"{rule.name}: " if rule.name is not None else ""
        return self.wrap(f"{rule.kind} {name}", rule.expr, 0)

    def let(self, let: ast.Let) -> str:
        return self.wrap(f"{'shared ' if let.shared else ''}let {let.name} = ", let.expr, 0)

    def param(self, param: ast.Param) -> str:
        default = " ".join(self.source_text(param.default_span).split())
        if isinstance(param.default, dict):
            default = "{" + ", ".join(f"{_quoted(k)}: {_canonical_number(v)}" for k, v in param.default.items()) + "}"
        return f"param {param.name}: {param.type} = {default}"

    def guard(self, guard: ast.Guard) -> str:
        return self.wrap("when ", guard.expr, 0)

    def protocol(self, statement: ast.Protocol) -> str:
        return "protocol " + ", ".join(statement.names)

    # modifiers
    def mod_when(self, modifier: ast.Modifier) -> str:
        return self.wrap("when ", modifier.value, len(INDENT))

    def mod_reason(self, modifier: ast.Modifier) -> str:
        return f"reason {self.source_text(modifier.value.span)}"

    def mod_flag(self, modifier: ast.Modifier) -> str:
        return modifier.kind

    def mod_if_none(self, modifier: ast.Modifier) -> str:
        return f"if none {modifier.value}"  # victim rules: what refusing every evictee answers

    def mod_weight(self, modifier: ast.Modifier) -> str:
        (number,) = self.signed_numbers(modifier, 1)
        return f"weight {number}"

    def mod_normalize(self, modifier: ast.Modifier) -> str:
        low, high = self.signed_numbers(modifier, 2)
        return f"normalize {low} to {high}"

    def signed_numbers(self, modifier: ast.Modifier, count: int) -> list[str]:
        """The numbers of a modifier as written (``-1e3``, ``4Gi``), read back from its span."""
        values = list(modifier.value) if count == 2 else [modifier.value]
        if any(isinstance(v, ast.Name) for v in values):  # a param or shared let: its name
            return [v.name if isinstance(v, ast.Name) else _canonical_number(v) for v in values]
        text = _STRING_OR_COMMENT.sub(" ", self.source_text(modifier.span))
        written = re.findall(r"(-)?\s*(" + _NUMBER_TEXT.pattern + ")", text)
        if len(written) == count:
            shown = [f"{sign}{number}" for sign, number, *_ in written]
            if all(_same_number(s, v) for s, v in zip(shown, values)):
                return shown
        return [_canonical_number(v) for v in values]

    # expressions
    def wrap(self, prefix: str, node, indent: int) -> str:
        """``prefix`` + the expression on one line when it fits in WIDTH columns; else broken
        before each operator of a top-level ``and``/``or`` or ``+``/``-`` chain, or before the ``for``/``if`` of
        an aggregate and the ``then``/``else`` of an ``if``, continuation lines indented by
        CONTINUATION (the pieces themselves are not broken further)."""
        line = prefix + self.expr(node)
        pieces = self.pieces(node) if indent + len(line) > WIDTH else None
        if not pieces:
            return line
        return prefix + f"\n{CONTINUATION}".join(pieces)

    def pieces(self, node) -> list[str] | None:
        if isinstance(node, ast.Binary) and node.op in ("and", "or", "+", "-"):
            level = _BINARY[node.op]
            rights: list[tuple[str, ast.Expr]] = []
            while isinstance(node, ast.Binary) and _BINARY[node.op] == level:  # a + b - c: ((a + b) - c)
                rights.insert(0, (node.op, node.right))
                node = node.left
            return [self.expr(node, level)] + [f"{op} {self.expr(right, level + 1)}" for op, right in rights]
        if isinstance(node, ast.Aggregate):
            cond = [f"if {self.expr(node.cond, _OR)}"] if node.cond is not None else []
            parts = [f"{node.func}({self.expr(node.elem, _OR)}", f"for {node.var} in {self.expr(node.iterable, _OR)}"]
            parts += cond
            parts[-1] += ")"
            return parts
        if isinstance(node, ast.Cond):
            return [f"if {self.expr(node.test)}", f"then {self.expr(node.then)}", f"else {self.expr(node.orelse)}"]
        return None

    def expr(self, node, context: int = 0) -> str:
        text = EXPRESSIONS[type(node)](self, node)
        return f"({text})" if _precedence(node) < context else text

    def source_text(self, span: Span) -> str:
        if span.line == span.end_line:
            return self.lines[span.line - 1][span.column - 1:span.end_column - 1]
        parts = [self.lines[span.line - 1][span.column - 1:]]
        parts += self.lines[span.line:span.end_line - 1]
        parts.append(self.lines[span.end_line - 1][:span.end_column - 1])
        return "\n".join(parts)


#: How each statement kind's head line is printed.
STATEMENTS: dict[type, Callable[..., str]] = {ast.RuleStatement: Formatter.rule, ast.Let: Formatter.let, ast.Guard: Formatter.guard,
                                             ast.Protocol: Formatter.protocol, ast.Param: Formatter.param}
#: How each modifier kind is printed (a new modifier adds one entry here).
MODIFIERS = {
    "when": Formatter.mod_when, "reason": Formatter.mod_reason, "unresolvable": Formatter.mod_flag,
    "permit": Formatter.mod_flag, "weight": Formatter.mod_weight, "normalize": Formatter.mod_normalize,
    "if none": Formatter.mod_if_none, "audit": Formatter.mod_flag,
}


# --- expressions ---------------------------------------------------------------------------------

#: Binding strength, loosest first, as in grammar/policy.lark.
_IF, _OR, _AND, _NOT, _COMPARE, _COALESCE, _ADD, _MUL, _NEG, _POSTFIX = range(10)
_BINARY = {"or": _OR, "and": _AND, "??": _COALESCE, "+": _ADD, "-": _ADD, "*": _MUL, "/": _MUL, "%": _MUL,
           **{op: _COMPARE for op in ast.COMPARISONS}}


def _precedence(node) -> int:
    if isinstance(node, ast.Cond):
        return _IF
    if isinstance(node, ast.Binary):
        return _BINARY[node.op]
    if isinstance(node, ast.Unary):
        return _NOT if node.op == "not" else _NEG
    return _POSTFIX


def _expr_Binary(f: Formatter, node: ast.Binary) -> str:
    level = _BINARY[node.op]
    if level == _COMPARE:  # comparisons do not chain: both sides bind tighter
        left, right = level + 1, level + 1
    else:  # left-associative
        left, right = level, level + 1
    return f"{f.expr(node.left, left)} {node.op} {f.expr(node.right, right)}"


def _expr_Unary(f: Formatter, node: ast.Unary) -> str:
    if node.op == "not":
        return f"not {f.expr(node.operand, _NOT)}"
    return f"-{f.expr(node.operand, _NEG)}"


def _expr_Cond(f: Formatter, node: ast.Cond) -> str:
    return f"if {f.expr(node.test)} then {f.expr(node.then)} else {f.expr(node.orelse)}"


def _expr_FieldAccess(f: Formatter, node: ast.FieldAccess) -> str:
    return f"{f.expr(node.obj, _POSTFIX)}.{node.name}"


def _expr_Index(f: Formatter, node: ast.Index) -> str:
    return f"{f.expr(node.obj, _POSTFIX)}[{f.expr(node.key)}]"


def _expr_Call(f: Formatter, node: ast.Call) -> str:
    return f"{node.func}({', '.join(f.expr(a) for a in node.args)})"


def _expr_Aggregate(f: Formatter, node: ast.Aggregate) -> str:
    cond = f" if {f.expr(node.cond, _OR)}" if node.cond is not None else ""
    return f"{node.func}({f.expr(node.elem, _OR)} for {node.var} in {f.expr(node.iterable, _OR)}{cond})"


def _expr_ListLit(f: Formatter, node: ast.ListLit) -> str:
    return f"[{', '.join(f.expr(i) for i in node.items)}]"


def _expr_Name(f: Formatter, node: ast.Name) -> str:
    return node.name


def _expr_Literal(f: Formatter, node: ast.Literal) -> str:
    value = node.value
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    written = f.source_text(node.span)
    if isinstance(value, str):
        return written if written[:1] in "\"'" and written[-1:] == written[:1] else _quoted(value)
    return written if _same_number(written, value) else _canonical_number(value)


EXPRESSIONS: dict[type, Callable[..., str]] = {
    ast.Binary: _expr_Binary, ast.Unary: _expr_Unary, ast.Cond: _expr_Cond, ast.FieldAccess: _expr_FieldAccess,
    ast.Index: _expr_Index, ast.Call: _expr_Call, ast.Aggregate: _expr_Aggregate,
    ast.ListLit: _expr_ListLit, ast.Name: _expr_Name, ast.Literal: _expr_Literal,
}


_QUANTITY_TEXT = re.compile(r"[0-9]+(\.[0-9]+)?(Ki|Mi|Gi|Ti|Pi|Ei|m|k|M|G|T|P|E)")
_PLAIN_NUMBER = re.compile(r"[0-9]+(\.[0-9]+)?([eE][+-]?[0-9]+)?")


def _same_number(text: str, value) -> bool:
    """``text`` (as written, maybe signed) reads back as exactly ``value``."""
    sign, digits = (-1, text[1:]) if text.startswith("-") else (1, text)
    if _QUANTITY_TEXT.fullmatch(digits):
        parsed = quantity_literal(digits)
    elif _PLAIN_NUMBER.fullmatch(digits):
        parsed = number_literal(digits)
    else:
        return False
    return parsed is not None and sign * parsed == value and type(sign * parsed) is type(value)


def _canonical_number(value) -> str:
    return repr(value)


def _quoted(value: str) -> str:
    escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t")
    escaped = escaped.replace("\r", "\\r").replace("\0", "\\0")
    return f'"{escaped}"'


# --- comparing trees -----------------------------------------------------------------------------

def shape(node):
    """A node as nested tuples without its spans: equal shapes mean the same program."""
    if isinstance(node, (list, tuple)):
        return tuple(shape(n) for n in node)
    if isinstance(node, ast.PolicyFile):
        return shape(node.statements)
    if hasattr(node, "__dataclass_fields__") and not isinstance(node, Span):
        return (type(node).__name__,) + tuple(
            (f.name, shape(getattr(node, f.name))) for f in fields(node)
            if not _spans(getattr(node, f.name)))
    return node


def _spans(value) -> bool:
    """A span, or a tuple of them (``Protocol.name_spans``): where, not what."""
    return isinstance(value, Span) or (isinstance(value, tuple) and bool(value)
                                       and all(isinstance(v, Span) for v in value))
