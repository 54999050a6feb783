"""parse (Lark LALR over grammar/policy.lark) and build (Lark tree → lang.ast), with friendly errors.

With ``syntax.py`` (the Lark parser, built once per process on first use) and ``slips.py`` (syntax
errors named for what the writer slipped on), the only modules that import ``lark``.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

import lark
from lark import Transformer, v_args

from policy_extender.errors import Diagnostic, PolicyError, Span
from policy_extender.lang import ast, codes
from policy_extender.lang.slips import syntax_diagnostic
from policy_extender.lang.syntax import Locator, lark_parser, template_pieces

MAX_SOURCE_CHARS = 256 * 1024
MAX_DEPTH = 100
MAX_LITERAL = 2**63
#: The types a ``param`` may declare.
PARAM_TYPES = ("number", "string", "bool", "map[number]")

_QUANTITY_SUFFIXES = {
    "Ki": Decimal(2**10), "Mi": Decimal(2**20), "Gi": Decimal(2**30), "Ti": Decimal(2**40),
    "Pi": Decimal(2**50), "Ei": Decimal(2**60), "m": Decimal("0.001"), "k": Decimal(10**3),
    "M": Decimal(10**6), "G": Decimal(10**9), "T": Decimal(10**12), "P": Decimal(10**15),
    "E": Decimal(10**18),
}
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", '"': '"', "'": "'", "0": "\0"}


def parse_file(name: str, source: str) -> ast.PolicyFile:
    """Parse and build one policy file; raises ``PolicyError`` with every syntax error found.

    A good file is parsed in one pass. Only when that fails is the file parsed again statement by
    statement (a statement starts at column 1), so that every statement's syntax error is
    reported; the error then carries the statements that did parse as ``partial`` (a
    ``PolicyFile``) for the checker to check.
    """
    loc = Locator(name)
    try:
        tree = _parse(source, "start", loc)
        return ast.PolicyFile(name, source, tuple(_build(tree, loc, source)))
    except PolicyError as err:
        if any(d.code == codes.E501 for d in err.diagnostics):
            raise
    return _recover(name, source)


#: The newline that ends a statement: the next line starts with neither blank nor '#' (_NL).
_STATEMENT_BREAK = re.compile(r"\n(?=[^\s#])")
#: The name a ``let`` that did not parse meant to bind, so that its uses are not reported too.
_LET_NAME = re.compile(r"(?:shared[ \t]+)?(?:let|param)[ \t]+([A-Za-z_][A-Za-z0-9_]*)")


def statement_chunks(source: str) -> list[tuple[int, str]]:
    """(first line, text) of each statement of ``source``, in order; each text keeps its newline."""
    chunks, start, line = [], 0, 1
    for match in _STATEMENT_BREAK.finditer(source):
        text = source[start:match.end()]
        chunks.append((line, text))
        line += text.count("\n")
        start = match.end()
    chunks.append((line, source[start:]))
    return chunks


def _recover(name: str, source: str):
    statements, diagnostics = [], []
    chunks = statement_chunks(source)
    for i, (line, text) in enumerate(chunks):
        loc = Locator(name, line)
        try:
            tree = _parse(text, "start", loc, source, ends_file=i == len(chunks) - 1)
            statements.extend(_build(tree, loc, source))
        except PolicyError as err:
            diagnostics.extend(err.diagnostics)
            let = _LET_NAME.match(text)
            if let:  # stands for the broken let: its uses are checked as 'any', not 'unknown name'
                span = loc.span(1, 1, 1, 1 + len(let.group()))
                statements.append(ast.Let(let.group(1), None, span,  # type: ignore[arg-type]  # never compiled: the file has errors
                                          shared=let.group().startswith("shared")))
    error = PolicyError(diagnostics, {name: source})
    error.partial = ast.PolicyFile(name, source, tuple(statements))
    raise error


def parse_expression(text: str, loc: Locator, source: str | None = None) -> ast.Expr:
    """Parse one expression (a ``{hole}`` of a reason template, a shorthand's definition)."""
    return _build(_parse(text, "expr", loc, source), loc, source or text)


def _parse(text: str, start: str, loc: Locator, source: str | None = None, ends_file: bool = True):
    if len(text) > MAX_SOURCE_CHARS:
        _fail(loc, codes.E501, f"policy file is {len(text)} characters, the limit is {MAX_SOURCE_CHARS}",
              loc.span(1, 1, 1, 2), "split it into several files", source or text)
    _check_bracket_depth(text, loc, source or text)
    try:
        tree = lark_parser().parse(text, start=start)
    except lark.exceptions.UnexpectedInput as err:
        raise PolicyError([syntax_diagnostic(err, text, loc, ends_file)], {loc.file: source or text}) from None
    _check_depth(tree, loc, source or text)
    return tree


def _build(tree, loc: Locator, source: str):
    try:
        return Builder(loc, source).transform(tree)
    except lark.exceptions.VisitError as err:
        if isinstance(err.orig_exc, PolicyError):
            raise err.orig_exc from None
        raise


def _fail(loc: Locator, code: str, message: str, span: Span, hint: str | None, source: str):
    raise PolicyError([Diagnostic(code, message, span, hint)], {loc.file: source})


#: Strings, comments, brackets and newlines: what the bracket-depth scan needs to see.
_BRACKET_SCAN = re.compile(r'"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'|#[^\n]*|[([{]|[)\]}]|\n')


def _check_bracket_depth(text: str, loc: Locator, source: str) -> None:
    """Refuse bracket nesting deeper than MAX_DEPTH before Lark spends seconds building the tree.

    A linear scan (strings and comments skipped); nesting by operators is caught after parsing
    by ``_check_depth``.
    """
    depth, line, line_start = 0, 1, 0
    for match in _BRACKET_SCAN.finditer(text):
        char = match.group()
        if char == "\n":
            line, line_start = line + 1, match.end()
        elif char in "([{":
            depth += 1
            if depth > MAX_DEPTH:
                column = match.start() - line_start + 1
                _fail(loc, codes.E502, f"expression nested more than {MAX_DEPTH} levels deep",
                      loc.span(line, column, line, column + 1), "name parts of it with let", source)
        elif char in ")]}":
            depth = max(depth - 1, 0)


def _check_depth(tree, loc: Locator, source: str) -> None:
    """Refuse trees nested deeper than MAX_DEPTH before anything recurses over them."""
    stack = [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_DEPTH:
            _fail(loc, codes.E502, f"expression nested more than {MAX_DEPTH} levels deep",
                  loc.of_meta(node.meta), "name parts of it with let", source)
        stack.extend((c, depth + 1) for c in node.children if isinstance(c, lark.Tree))


# --- build ---------------------------------------------------------------------------------------

@v_args(meta=True)
class Builder(Transformer):
    """Bottom-up Lark tree → lang.ast, converting literals and parsing reason templates."""

    def __init__(self, loc: Locator, source: str):
        super().__init__()
        self.loc, self.source = loc, source

    def _span(self, meta) -> Span:
        return self.loc.of_meta(meta)

    # statements
    def start(self, meta, children):
        return [c for c in children if c is not None]

    def guard(self, meta, children):
        return ast.Guard(children[0], self._span(meta))

    def let(self, meta, children):
        name, expr = children
        return ast.Let(str(name), expr, self._span(meta))

    def audit(self, meta, children):
        return ast.Audit(self._span(meta))

    def shared_let(self, meta, children):
        name, expr = children
        return ast.Let(str(name), expr, self._span(meta), shared=True)

    def param(self, meta, children):
        name, type_name, element, default = children
        type_span = self.loc.of_token(type_name)
        written = str(type_name)
        if element is not None:
            written += f"[{element}]"
            type_span = Span(type_span.file, type_span.line, type_span.column, type_span.end_line,
                             self.loc.of_token(element).end_column + 1)
        if written not in PARAM_TYPES:
            raise self._error(codes.E206, f"unknown parameter type '{written}'", type_span,
                              "a parameter is a " + ", ".join(PARAM_TYPES))
        value = default.value if isinstance(default, ast.Literal) else default
        default_span = default.span if isinstance(default, ast.Literal) else self._span(meta)
        return ast.Param(str(name), written, value, self.loc.of_token(name), type_span, default_span,
                         self._span(meta))

    def param_number(self, meta, children):
        return ast.Literal(children[0], self._span(meta))

    def map_value(self, meta, children):
        pairs = [c for c in children if c is not None]
        keys = [self._unescape(str(k)[1:-1], self.loc.of_token(k)) for k in pairs[0::2]]
        return ast.Literal(dict(zip(keys, pairs[1::2])), self._span(meta))

    def constant_name(self, meta, children):
        return ast.Name(str(children[0]), self.loc.of_token(children[0]))

    def protocol(self, meta, children):
        return ast.Protocol(tuple(str(t) for t in children), tuple(self.loc.of_token(t) for t in children),
                            self._span(meta))

    def rule(self, meta, children):
        kind, name, expr, *mods = children
        name_span = self.loc.of_token(name) if name is not None else self.loc.of_token(kind)
        if name is not None:  # without its colon
            name_span = Span(name_span.file, name_span.line, name_span.column, name_span.end_line,
                             name_span.end_column - 1)
        rule_name = str(name)[:-1] if name is not None else None
        return ast.RuleStatement(str(kind), rule_name, name_span, expr, tuple(mods), self._span(meta))

    def mod_when(self, meta, children):
        return ast.Modifier("when", children[0], self._span(meta))

    def mod_reason(self, meta, children):
        return ast.Modifier("reason", self._template(children[0]), self._span(meta))

    def mod_unresolvable(self, meta, children):
        return ast.Modifier("unresolvable", None, self._span(meta))

    def mod_permit(self, meta, children):
        return ast.Modifier("permit", None, self._span(meta))

    def mod_audit(self, meta, children):
        return ast.Modifier("audit", None, self._span(meta))

    def mod_if_none_abstain(self, meta, children):
        return ast.Modifier("if none", "abstain", self._span(meta))

    def mod_if_none_permit(self, meta, children):
        return ast.Modifier("if none", "permit", self._span(meta))

    def mod_weight(self, meta, children):
        return ast.Modifier("weight", children[0], self._span(meta))

    def mod_normalize(self, meta, children):
        return ast.Modifier("normalize", (children[0], children[1]), self._span(meta))

    def signed(self, meta, children):
        sign, token = children
        value = self._number_value(token)
        return -value if sign is not None else value

    # expressions
    def if_expr(self, meta, children):
        test, then, orelse = children
        return ast.Cond(test, then, orelse, self._span(meta))

    def binary(self, meta, children):
        left, op, right = children
        return ast.Binary(str(op), left, right, self.loc.of_token(op), self._span(meta))

    def not_in(self, meta, children):
        left, not_tok, in_tok, right = children
        op_span = self.loc.span(not_tok.line, not_tok.column, in_tok.end_line, in_tok.end_column)
        return ast.Binary("not in", left, right, op_span, self._span(meta))

    def unary(self, meta, children):
        op, operand = children
        return ast.Unary(str(op), operand, self._span(meta))

    def field(self, meta, children):
        obj, name = children
        return ast.FieldAccess(obj, str(name), self.loc.of_token(name), self._span(meta))

    def index(self, meta, children):
        return ast.Index(children[0], children[1], self._span(meta))

    def call(self, meta, children):
        name, *args = children
        args = tuple(a for a in args if a is not None)
        return ast.Call(str(name), args, self.loc.of_token(name), self._span(meta))

    def aggregate(self, meta, children):
        func, elem, var, _in, iterable, cond = children
        if str(func) not in ast.AGGREGATES:
            raise self._error(codes.E101, f"'{func}' cannot aggregate: '... for {var} in ...' works only in "
                              + ", ".join(ast.AGGREGATES), self.loc.of_token(func), None)
        return ast.Aggregate(str(func), elem, str(var), self.loc.of_token(var), iterable, cond,
                             self._span(meta))

    def list(self, meta, children):
        return ast.ListLit(tuple(c for c in children if c is not None), self._span(meta))

    def name(self, meta, children):
        return ast.Name(str(children[0]), self._span(meta))

    def number(self, meta, children):
        return ast.Literal(self._number_value(children[0]), self._span(meta))

    quantity = number

    def string(self, meta, children):
        token = children[0]
        return ast.Literal(self._unescape(str(token)[1:-1], self.loc.of_token(token)), self._span(meta))

    def true(self, meta, children):
        return ast.Literal(True, self._span(meta))

    def false(self, meta, children):
        return ast.Literal(False, self._span(meta))

    def null(self, meta, children):
        return ast.Literal(None, self._span(meta))

    # literal conversion
    def _number_value(self, token) -> int | float:
        text, span = str(token), self.loc.of_token(token)
        value = quantity_literal(text) if token.type == "QUANTITY" else number_literal(text)
        if value is None or abs(value) >= MAX_LITERAL:
            raise self._error(codes.E503, f"number {text} is out of range (limit 2^63)", span, None)
        return value

    def _unescape(self, raw: str, span: Span) -> str:
        out, i = [], 0
        while i < len(raw):
            char = raw[i]
            if char != "\\":
                out.append(char)
                i += 1
                continue
            decoded, width = _escape(raw, i)
            if decoded is None:
                raise self._error(codes.E103, f"unknown escape {raw[i:i + 2]!r} in string", span,
                                  "use \\n \\t \\r \\\\ \\\" \\' or \\uXXXX")
            out.append(decoded)
            i += width
        return "".join(out)

    def _template(self, token) -> ast.Template:
        raw, span = str(token)[1:-1], self.loc.of_token(token)
        parts: list = []
        for kind, start, text in template_pieces(raw):
            if kind == "error":
                raise self._error(codes.E107, text, span, "write {{ and }} for literal braces")
            if kind == "text":
                parts.append(self._unescape(text, span))
                continue
            hole_loc = Locator(self.loc.file, span.line, span.column + 1 + start)
            parts.append(parse_expression(text, hole_loc, self.source))
        return ast.Template(tuple(parts), span)

    def _error(self, code: str, message: str, span: Span, hint: str | None) -> PolicyError:
        return PolicyError([Diagnostic(code, message, span, hint)], {self.loc.file: self.source})


def number_literal(text: str) -> int | float | None:
    """The value of a NUMBER token (``12``, ``0.5``, ``1e3``); None when out of range."""
    if "." in text or "e" in text or "E" in text:
        value = float(text)
        return value if value != float("inf") else None
    if len(text.lstrip("0")) > 19:  # past 2^63 (and int() refuses 4,300 digits): out of range
        return None
    return int(text)


def quantity_literal(text: str) -> int | float | None:
    """The value of a QUANTITY token (``500m``, ``4Gi``) in whole units; None when malformed."""
    suffix = text.lstrip("0123456789.")
    try:
        value = Decimal(text[: len(text) - len(suffix)]) * _QUANTITY_SUFFIXES[suffix]
    except (InvalidOperation, KeyError):
        return None
    return int(value) if value == value.to_integral_value() else float(value)


def _escape(raw: str, i: int) -> tuple[str | None, int]:
    char = raw[i + 1] if i + 1 < len(raw) else ""
    if char in _ESCAPES and char:
        return _ESCAPES[char], 2
    if char == "u" and len(raw) >= i + 6:
        try:
            return chr(int(raw[i + 2:i + 6], 16)), 6
        except ValueError:
            return None, 2
    return None, 2
