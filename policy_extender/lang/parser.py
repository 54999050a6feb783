"""parse (Lark LALR over grammar/policy.lark) and build (Lark tree → lang.ast), with friendly errors.

The only module that imports ``lark``. The Lark parser is built once per process, on first use.
"""

from __future__ import annotations

import difflib
import functools
import importlib.resources
import re
from decimal import Decimal, InvalidOperation
from pathlib import Path

import lark
from lark import Transformer, v_args

from policy_extender import schema
from policy_extender.errors import Diagnostic, PolicyError, Span
from policy_extender.lang import ast, codes

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
_TOKEN_WORDS = {
    "_NL": "the end of the statement", "$END": "the end of the file", "NAME": "name",
    "NUMBER": "number", "QUANTITY": "quantity", "STRING": "string", "KIND": "rule kind",
    "RULE_NAME": "rule name", "CMP": "comparison", "LPAR": "'('", "RPAR": "')'",
    "LSQB": "'['", "RSQB": "']'", "COMMA": "','", "DOT": "'.'", "PROTOCOL": "protocol name",
}


@functools.lru_cache(maxsize=1)
def _lark() -> lark.Lark:
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
        tree = _lark().parse(text, start=start)
    except lark.exceptions.UnexpectedInput as err:
        raise PolicyError([_syntax_diagnostic(err, text, loc, ends_file)], {loc.file: source or text}) from None
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


# --- syntax errors -------------------------------------------------------------------------------

def _syntax_diagnostic(err, text: str, loc: Locator, ends_file: bool = True) -> Diagnostic:
    line, column = max(err.line, 1), max(err.column, 1)
    token = getattr(err, "token", None)
    at_end = token is None or token.type == "$END"
    if isinstance(err, lark.exceptions.UnexpectedCharacters):
        position = err.pos_in_stream or 0
    else:
        position = len(text) if at_end else token.start_pos or 0  # type: ignore[union-attr]  # not at_end: a token
    slip = _slip(err, token, text, position, loc)
    if slip is not None:
        return slip
    if isinstance(err, lark.exceptions.UnexpectedCharacters):
        return _bad_character(err, text, loc.span(line, column, line, column + 1))
    dangling = _dangling(text, len(text) if at_end else token.start_pos, loc)  # type: ignore[union-attr]  # not at_end: a token
    if dangling is not None:
        return dangling
    if at_end and not ends_file:  # one statement parsed alone: its end is the _NL of the file
        line = text.count("\n")
        column = len(text.split("\n")[line - 1]) + 1
        return Diagnostic(codes.E101, "the statement ends before it is complete", loc.span(line, column, line, column + 1),
                          "a line that starts with whitespace continues the previous statement")
    if at_end:
        end = text.rstrip()
        line, column = end.count("\n") + 1, len(end) - end.rfind("\n")
        return Diagnostic(codes.E101, "unexpected end of input", loc.span(line, column, line, column + 1),
                          "the expression or rule is incomplete")
    span = loc.span(line, column, line, column + max(1, len(str(token))))
    return _unexpected_token(token, err, text, span)


#: Strings and comments, skipped when looking back for a dangling operator.
_STRING_OR_COMMENT = re.compile(r'"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'|#[^\n]*')
#: 'and' / 'or' ending a line, then only blanks, comments, newlines and at most one modifier word.
_DANGLING = re.compile(r"(?<![A-Za-z0-9_.])(and|or)[ \t\r\f]*\n\s*"
                       r"(?:(?:when|reason|unresolvable|weight|normalize|permit|audit)(?![A-Za-z0-9_])\s*)?\Z")


def _dangling(text: str, position: int, loc: Locator) -> Diagnostic | None:
    """A syntax error right after a line that ends with 'and'/'or', named as that operator."""
    before = _STRING_OR_COMMENT.sub(lambda m: " " * len(m.group()), text[:position])
    match = _DANGLING.search(before)
    if match is None:
        return None
    op, start = match.group(1), match.start(1)
    line = text.count("\n", 0, start) + 1
    column = start - (text.rfind("\n", 0, start) + 1) + 1
    return Diagnostic(codes.E101, f"'{op}' at the end of line {loc.span(line, 1, line, 1).line} has nothing after it",
                      loc.span(line, column, line, column + len(op)),
                      f"write the rest of the condition after '{op}' on an indented line, or remove '{op}'")


# --- the slips people make, named (docs/language.md, "Common slips") ---------------------------

#: The operators of other languages, and the word this one writes instead.
_FOREIGN_OPERATORS = {"&&": "and", "||": "or", "&": "and", "|": "or", "!": "not"}
#: A string literal on one line (either quote).
_STRING = re.compile(r'"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'')
_WORD_CHAR = re.compile(r"[A-Za-z0-9_]")
_KINDS = tuple(schema.DECISION_ROOTS)
_MODIFIERS = ("when", "reason", "unresolvable", "weight", "normalize", "permit", "if none", "audit")
#: A rule's first line up to its name, when the name is not followed by its ':' (``filter gpu-only ``).
_NAME_WITHOUT_COLON = re.compile(rf"({'|'.join(_KINDS)})[ \t]+([A-Za-z_][A-Za-z0-9_-]*)([ \t]+)\Z")


def _slip(err, token, text: str, position: int, loc: Locator) -> Diagnostic | None:
    """A syntax error that is one of the slips people make, named with its fix; None otherwise."""
    line_start = text.rfind("\n", 0, position) + 1
    line = text.count("\n", 0, position) + 1
    end = text.find("\n", position)
    line_text = text[line_start:end if end >= 0 else len(text)]
    column = position - line_start + 1

    def span(start: int, stop: int) -> Span:  # columns of this line, 1-based, stop exclusive
        return loc.span(line, start, line, stop)

    quoted = _quote_ends_template(line_text, column - 1)
    if quoted is not None:
        quote, at, hole = quoted
        other, quotes = ("'", "single quotes") if quote == '"' else ('"', "double quotes")
        return Diagnostic(codes.E101, f"the {quote} inside a {{...}} hole ends the reason's string early",
                          span(at + 1, at + 2), f"write the strings inside a hole in {quotes}: {hole.replace(quote, other)}")
    before = line_text[:column - 1]
    unnamed = _NAME_WITHOUT_COLON.match(before)
    colon = err.char == ":" if isinstance(err, lark.exceptions.UnexpectedCharacters) else str(token) == ":"
    if colon and unnamed is not None:  # ':' is a token of `param` statements, a character elsewhere
        gap = unnamed.start(3) + 1
        return Diagnostic(codes.E101, f"a space between the rule name '{unnamed.group(2)}' and its ':'",
                          span(gap, column + 1),
                          f"write the name and its ':' together: {unnamed.group(1)} {unnamed.group(2)}: "
                          + line_text[column:].strip())
    if isinstance(err, lark.exceptions.UnexpectedCharacters):
        if err.char == ":" and unnamed is not None:
            gap = unnamed.start(3) + 1
            return Diagnostic(codes.E101, f"a space between the rule name '{unnamed.group(2)}' and its ':'",
                              span(gap, column + 1),
                              f"write the name and its ':' together: {unnamed.group(1)} {unnamed.group(2)}: "
                              + line_text[column:].strip())
        operator = line_text[column - 1:column + 1]
        operator = operator if operator in _FOREIGN_OPERATORS else line_text[column - 1]
        if operator in _FOREIGN_OPERATORS:
            word = _FOREIGN_OPERATORS[operator]
            return Diagnostic(codes.E104, f"there is no '{operator}' operator: write '{word}'",
                              span(column, column + len(operator)),
                              "the logical operators are the words and, or, not: a and not (b or c)")
        return None
    word = str(token) if token is not None else ""
    if word == "for" and before.count("[") > before.count("]"):
        return Diagnostic(codes.E101, "there are no list comprehensions ('[x for x in list]')", span(column, column + 3),
                          "aggregate over the list instead: count(t for t in node.tasks if t.job_id == task.job_id), "
                          "sum(...), min(...), max(...), any(...), all(...)")
    if word == "where":
        return Diagnostic(codes.E101, "there is no 'where': an aggregate's condition follows 'if'",
                          span(column, column + 5),
                          "write count(n for n in cluster.nodes if n.ready): the variable, 'for', 'in' the list, "
                          "'if' the condition")
    if token is None or token.type != "NAME":
        return None
    if unnamed is not None:
        name = unnamed.group(2)
        return Diagnostic(codes.E101, f"the rule name '{name}' is not followed by ':'",
                          span(unnamed.start(2) + 1, unnamed.end(2) + 1),
                          f"write the name and its ':' together: {unnamed.group(1)} {name}: {line_text[column - 1:].strip()}")
    return _misspelled(err, line_text, column - 1, span)


def _quote_ends_template(line_text: str, index: int) -> tuple[str, int, str] | None:
    """(quote, its index, the hole as written) when the string that ends just before ``index``
    opens a ``{`` hole it does not close: a quote inside the hole ended the string."""
    for match in _STRING.finditer(line_text):
        if match.end() > index or line_text[match.end():index].strip() \
                or not line_text[:match.start()].rstrip().endswith("reason"):
            continue
        raw = match.group()[1:-1]
        unclosed = next((start for kind, start, _ in _template_pieces(raw)
                         if kind == "error" and raw[start] == "{"), None)
        if unclosed is None:
            continue
        hole_start = match.start() + 1 + unclosed
        hole_end = line_text.find("}", index)
        hole = line_text[hole_start:hole_end + 1] if hole_end >= 0 else line_text[hole_start:]
        return match.group()[0], match.end() - 1, hole
    return None


def _misspelled(err, line_text: str, index: int, span) -> Diagnostic | None:
    """``reasons``, ``filters``, ``weigth``: a word close to a keyword where a keyword can go."""
    start, stop = index, index
    while start > 0 and _WORD_CHAR.match(line_text[start - 1]):
        start -= 1
    while stop < len(line_text) and _WORD_CHAR.match(line_text[stop]):
        stop += 1
    word = line_text[start:stop]
    expected = set(getattr(err, "expected", None) or ())
    glued = start < index  # ``reasons``: the keyword 'reason' was read, then the name 's'
    keywords = [t.pattern.value for t in _lark().terminals
                if t.pattern.type == "str" and t.pattern.value.isalpha() and (glued or t.name in expected)]
    if glued or "KIND" in expected:
        keywords += _KINDS
    close = difflib.get_close_matches(word, keywords, n=1, cutoff=0.7)
    if not close or close[0] == word:
        return None
    if close[0] in (*_KINDS, "let", "when", "audit") and start == 0:
        hint = f"a statement starts with a rule kind ({', '.join(_KINDS)}), let, when, audit or protocol"
    elif close[0] in _MODIFIERS:
        hint = "a modifier is one of " + ", ".join(_MODIFIERS)
    else:
        hint = None
    return Diagnostic(codes.E101, f"unknown word '{word}' (did you mean '{close[0]}'?)", span(start + 1, stop + 1), hint)


def _bad_character(err, text: str, span: Span) -> Diagnostic:
    char = err.char
    if char in "\"'":
        return Diagnostic(codes.E102, "unterminated string", span, f"close it with {char} on the same line")
    return Diagnostic(codes.E102, f"unexpected character {char!r}", span, None)


def _unexpected_token(token, err, text: str, span: Span) -> Diagnostic:
    value = str(token)
    if value == "=":
        return Diagnostic(codes.E101, "'=' is not a comparison (did you mean '=='?)", span,
                          "'=' only binds a name: let name = expression")
    if value == "*" and token.start_pos and text[token.start_pos - 1] == "*":
        return Diagnostic(codes.E104, "there is no '**' operator", span, "multiply explicitly: x * x")
    if token.type in ("CMP", "IN") and _after_comparison(err):
        return Diagnostic(codes.E101, f"comparisons do not chain: unexpected {value!r}", span,
                          "write a < b and b < c")
    if token.type == "_NL":
        return Diagnostic(codes.E101, "the statement ends before it is complete", span,
                          "a line that starts with whitespace continues the previous statement")
    if span.column == 1 and value in ("when", "reason", "unresolvable", "weight", "normalize", "permit"):
        return Diagnostic(codes.E101, f"modifier '{value}' at column 1 starts a new statement", span,
                          "indent the modifier line so it continues the rule above")
    return Diagnostic(codes.E101, f"unexpected {_describe(token)}", span, _expected(err))


def _after_comparison(err) -> bool:
    expected = getattr(err, "expected", None) or set()
    return "CMP" not in expected


def _describe(token) -> str:
    if token.type in ("NAME", "NUMBER", "QUANTITY", "STRING", "KIND", "RULE_NAME"):
        return f"{_TOKEN_WORDS[token.type]} {str(token)!r}"
    return repr(str(token))


def _expected(err) -> str | None:
    expected = sorted(getattr(err, "expected", None) or ())
    words = [_a(_TOKEN_WORDS[e]) if e in _TOKEN_WORDS else _terminal_text(e) for e in expected]
    words = [w for w in words if w]
    if not words:
        return None
    shown = ", ".join(words[:8]) + (", ..." if len(words) > 8 else "")  # type: ignore[arg-type]  # no None left
    return f"expected {shown}"


def _a(word: str) -> str:
    return word if word.startswith(("'", "the ")) else f"a {word}"


def _terminal_text(name: str) -> str | None:
    try:
        pattern = _lark().get_terminal(name).pattern
    except KeyError:
        return None
    if pattern.type == "str":
        return repr(pattern.value)
    return name.lower()


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
        for kind, start, text in _template_pieces(raw):
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


def _template_pieces(raw: str):
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
