"""The patterns of ``matches()``: compiled once, at load time, by Google's RE2 (the ``google-re2``
binding), whose matching time is linear in the subject whatever the pattern.

A backtracking engine (Python's ``re``) can take exponential time on a pattern as short as
``(a?){26}a{26}`` (4.5 s on 26 characters) and polynomial time on ``.*.*=`` (2.3 s over 1,000
node names), holding the GIL the whole time. No shape check catches every such pattern, so the
language has no backtracking engine at all: RE2 builds an automaton and matches in one pass.

The price is the constructs only a backtracking engine can run: backreferences, lookaround,
atomic groups, possessive quantifiers and conditionals. A pattern using one is refused when the
policy loads (E504), with what to write instead; any other pattern RE2 cannot parse is E308 with
RE2's own message. ``refusal`` finds the constructs by a scan of the pattern (escapes and
character classes skipped), so the message names the construct and where it is.
"""

from __future__ import annotations

import re as python_re
from typing import Callable, NamedTuple

import re2

from policy_extender.lang import codes

#: What RE2 compiles with: no logging of parse errors to stderr (the error is the diagnostic), and a
#: bounded automaton (RE2's default, 8 MiB: a pattern needing more is refused at compile time).
_OPTIONS = re2.Options()
_OPTIONS.log_errors = False

#: Tokens of a pattern, in order: an escape, a character class (a `]` first in it is literal), the
#: opening of a special group, a possessive quantifier, or any other character.
_TOKEN = python_re.compile(
    r"(?P<escape>\\(?P<escaped>.))"
    r"|(?P<klass>\[\^?\]?(?:\\.|\[:[a-z]+:\]|[^\]\\])*\])"
    r"|(?P<group>\(\?(?:<[=!]|[=!>(]))"
    r"|(?P<possessive>(?:[*+?]|\{\d+(?:,\d*)?\})\+)"
    r"|.", python_re.DOTALL)

#: construct -> (what it is, what to write instead)
_REFUSED = {
    "(?=": ("a lookahead", "split the test in two: matches(s, \"A\") and not matches(s, \"B\")"),
    "(?!": ("a negative lookahead", "split the test in two: matches(s, \"A\") and not matches(s, \"B\")"),
    "(?<=": ("a lookbehind", "match the preceding text too, or split the test: "
             "matches(s, \"A\") and not matches(s, \"B\")"),
    "(?<!": ("a negative lookbehind", "split the test in two: matches(s, \"A\") and not matches(s, \"B\")"),
    "(?>": ("an atomic group", "write the group without `?>`: RE2 never backtracks, so it is not needed"),
    "(?(": ("a conditional group", "write the alternatives out with `|`"),
    "backreference": ("a backreference", "compare the parts with == after split(), or list the "
                      "allowed values with |: a backreference needs a backtracking engine"),
    "possessive": ("a possessive quantifier", "drop the trailing `+` of the quantifier: RE2 never "
                   "backtracks, so it is not needed"),
    "\\Z": ("`\\Z`", "write `$` (or `\\z`): RE2 has no `\\Z`"),
}


#: Instructions a compiled pattern may have. ``search`` runs RE2's DFA (an ``re2.Set``), which builds
#: at most one state per subject character (257 on a 256-character subject), each at most this
#: many instructions: about 2 MiB, well inside the DFA's share of RE2's 8 MiB default ``max_mem``.
#: So the DFA never runs out of memory mid-search, where a ``Set`` would answer "no match".
#: ``(a?){26}a{26}`` is 134 instructions, ``^gpu-node-[0-9]+$`` 6, ``(a?){1000}a{1000}`` 5004.
MAX_PROGRAM = 2048


class Refused(ValueError):
    """A pattern ``matches()`` cannot take; ``code`` is E504 (a backtracking construct) or E308."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code


class Pattern(NamedTuple):
    """A compiled pattern: ``search(subject)`` is not None when the pattern matches somewhere in
    the subject, in time linear in the subject.

    ``search`` is the ``Match`` of a one-pattern unanchored ``re2.Set`` (RE2's DFA, no match
    object built): 0.9 us a call against 5.2 us for ``re2.compile(p).search`` (the binding
    builds a match object and its offsets in Python) and 0.2 us for Python's ``re`` on
    ``^gpu-node-[0-9]+$``; see bench/cpu/regex.py."""

    source: str
    search: Callable[[str], object]


def refusal(pattern: str) -> tuple[str, int] | None:
    """(the construct, its 0-based offset) of the first backtracking-only construct in ``pattern``."""
    for token in _TOKEN.finditer(pattern):
        escaped = token.group("escaped")
        if escaped is not None:
            if escaped in "123456789" or (escaped == "k" and pattern[token.end():token.end() + 1] in ("<", "'", "{")):
                return "backreference", token.start()
            if escaped == "Z":
                return "\\Z", token.start()
        elif token.group("group") is not None:
            return token.group("group"), token.start()
        elif token.group("possessive") is not None:
            return "possessive", token.start()
        elif token.group(0) == "(" and pattern.startswith("(?P=", token.start()):
            return "backreference", token.start()
    return None


def compile_pattern(pattern: str) -> Pattern:
    """``pattern`` compiled by RE2, or ``Refused`` with the code, what and how to fix."""
    found = refusal(pattern)
    if found is not None:
        construct, offset = found
        what, fix = _REFUSED[construct]
        raise Refused(codes.E504, f"regex {pattern!r} uses {what} (at character {offset + 1}), which RE2, the "
                      f"linear-time engine of matches(), does not have: {fix}")
    try:
        size = re2.compile(pattern, _OPTIONS).programsize  # parses it, with RE2's error for one it cannot take
        if size > MAX_PROGRAM:
            raise Refused(codes.E308, f"regex {pattern!r} compiles to {size} instructions, more than {MAX_PROGRAM}: "
                          "shorten it or bound its repeats ({1,10}, not {1,500})")
        one = re2.Set.SearchSet(_OPTIONS)
        one.Add(pattern)
        one.Compile()
    except re2.error as err:
        text = err.args[0] if err.args else str(err)
        if isinstance(text, bytes):
            text = text.decode("utf-8", "replace")
        raise Refused(codes.E308, f"invalid regex {pattern!r}: {text}") from None
    return Pattern(pattern, one.Match)
