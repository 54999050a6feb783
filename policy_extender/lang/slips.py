"""Syntax errors a writer can act on: a Lark ``UnexpectedInput`` turned into one ``Diagnostic`` that
names the slip (a dangling 'and', '&&' for 'and', a rule name without its colon, a misspelled
keyword, a quote that ends a reason template) with where it is and how to fix it."""

from __future__ import annotations

import difflib
import re

import lark

from policy_extender import schema
from policy_extender.errors import Diagnostic, Span
from policy_extender.lang import codes
from policy_extender.lang.syntax import TOKEN_WORDS, Locator, lark_parser, template_pieces

def syntax_diagnostic(err, text: str, loc: Locator, ends_file: bool = True) -> Diagnostic:
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
        unclosed = next((start for kind, start, _ in template_pieces(raw)
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
    keywords = [t.pattern.value for t in lark_parser().terminals
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
        return f"{TOKEN_WORDS[token.type]} {str(token)!r}"
    return repr(str(token))


def _expected(err) -> str | None:
    expected = sorted(getattr(err, "expected", None) or ())
    words = [_a(TOKEN_WORDS[e]) if e in TOKEN_WORDS else _terminal_text(e) for e in expected]
    words = [w for w in words if w]
    if not words:
        return None
    shown = ", ".join(words[:8]) + (", ..." if len(words) > 8 else "")  # type: ignore[arg-type]  # no None left
    return f"expected {shown}"


def _a(word: str) -> str:
    return word if word.startswith(("'", "the ")) else f"a {word}"


def _terminal_text(name: str) -> str | None:
    try:
        pattern = lark_parser().get_terminal(name).pattern
    except KeyError:
        return None
    if pattern.type == "str":
        return repr(pattern.value)
    return name.lower()
