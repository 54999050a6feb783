"""Every builtin function, declared once: parameter types, result type, implementation, doc.

Implementations receive evaluated arguments. Unless ``nulls`` is set, a null argument makes the
result null before the implementation runs. An implementation may return None for "no value"
(``number("abc")``); run-time bounds are enforced by the compiler around every call.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from decimal import Decimal
from typing import Callable

from policy_extender.lang import codes, regex, runtime, types

MAX_REGEX_SUBJECT = 256  # characters a regex is matched against (longer subjects → null)


class RefusedLiteral(ValueError):
    """A literal argument a builtin cannot accept; ``code`` is the diagnostic code."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class Builtin:
    name: str
    params: tuple[str, ...]
    result: str | Callable[[list[str]], str]
    impl: Callable
    doc: str
    optional: int = 0        # trailing parameters that may be left out
    nulls: bool = False      # the implementation handles null arguments itself
    literal: int | None = None  # index of an argument that must be a literal, given to prepare()
    prepare: Callable | None = None  # literal -> compiled value; raises ValueError with a message

    def result_type(self, arg_types: list[str]) -> str:
        return self.result(arg_types) if callable(self.result) else self.result

    def signature(self) -> str:
        required = len(self.params) - self.optional
        shown = [p if i < required else f"[{p}]" for i, p in enumerate(self.params)]
        result = self.result if isinstance(self.result, str) else self.result(list(self.params))
        return f"{self.name}({', '.join(shown)}) -> {result}"


BUILTINS: dict[str, Builtin] = {}


def builtin(name, params, result, doc, **options):
    def register(impl):
        BUILTINS[name] = Builtin(name, tuple(params), result, impl, doc, **options)
        return impl
    return register


def _same_as_first(arg_types):
    return arg_types[0] if not types.loose(arg_types[0]) else (arg_types[1] if len(arg_types) > 1 else "any")


def _elements_of(arg_types):
    inner = types.element(arg_types[0])
    return f"list[{inner}]" if inner else "list[any]"


# --- strings, lists, maps ------------------------------------------------------------------------

@builtin("len", ["string|list|map"], "number", "length of a string (characters), list or map")
def _len(value):
    return len(value)


@builtin("lower", ["string"], "string", "lower-case copy of a string")
def _lower(value):
    return value.lower()


@builtin("upper", ["string"], "string", "upper-case copy of a string")
def _upper(value):
    return value.upper()


@builtin("startswith", ["string", "string"], "bool", "the string starts with the prefix")
def _startswith(value, prefix):
    return value.startswith(prefix)


@builtin("endswith", ["string", "string"], "bool", "the string ends with the suffix")
def _endswith(value, suffix):
    return value.endswith(suffix)


@builtin("contains", ["string|list|map", "any"], "bool",
         "substring of a string, element of a list (by ==), key of a map")
def _contains(container, item):
    return runtime.contains(container, item)


def _compile_regex(pattern: object):
    if not isinstance(pattern, str):
        raise RefusedLiteral(codes.E306, "the pattern of matches() must be a string literal")
    try:
        return regex.compile_pattern(pattern)
    except regex.Refused as refused:
        raise RefusedLiteral(refused.code, str(refused)) from None


@builtin("matches", ["string", "string"], "bool",
         f"the regex (a string literal, compiled at load time by RE2: linear time, no backreferences "
         f"or lookaround) matches somewhere in the string; "
         f"subjects longer than {MAX_REGEX_SUBJECT} characters give null", literal=1, prepare=_compile_regex)
def _matches(value, pattern):
    if len(value) > MAX_REGEX_SUBJECT:
        return None
    return pattern.search(value) is not None


@builtin("split", ["string", "string"], "list[string]", "the parts of a string between separators")
def _split(value, separator):
    return value.split(separator) if separator else list(value)


@builtin("join", ["list[string]", "string"], "string", "the strings of a list joined by a separator")
def _join(values, separator):
    return separator.join(v for v in values if isinstance(v, str))


@builtin("keys", ["map"], "list[string]", "the keys of a map, sorted")
def _keys(value):
    return sorted(value)


@builtin("values", ["map"], _elements_of, "the values of a map, in key order")
def _values(value):
    return [value[k] for k in sorted(value)]


# --- conversions ---------------------------------------------------------------------------------

_SUFFIXES: dict[str, int | Decimal] = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60,
             "m": Decimal("0.001"), "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18}
_QUANTITY = re.compile(r"\s*([+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)(Ki|Mi|Gi|Ti|Pi|Ei|m|k|M|G|T|P|E)?\s*")


@builtin("number", ["string|number"], "number",
         "a number from a string (plain or a Kubernetes quantity like 4Gi or 500m); null if it is not one")
def _number(value):
    if runtime.is_number(value):
        return value
    match = _QUANTITY.fullmatch(value) if len(value) <= 64 else None
    if not match:
        return None
    try:
        amount = Decimal(match.group(1)) * Decimal(_SUFFIXES.get(match.group(2), 1))
    except ArithmeticError:  # InvalidOperation, and Overflow for exponents like 9e999999999
        return None
    if not amount.is_finite() or abs(amount) > runtime.MAX_NUMBER:
        return None
    return int(amount) if amount == amount.to_integral_value() else float(amount)


@builtin("string", ["any"], "string", "a value as text (strings unchanged)")
def _string(value):
    return runtime.text(value)


# --- numbers -------------------------------------------------------------------------------------

@builtin("min", ["number", "number"], "number", "the smaller of two numbers")
def _min(a, b):
    return min(a, b)


@builtin("max", ["number", "number"], "number", "the larger of two numbers")
def _max(a, b):
    return max(a, b)


@builtin("abs", ["number"], "number", "absolute value")
def _abs(value):
    return abs(value)


@builtin("floor", ["number"], "number", "largest whole number not above")
def _floor(value):
    return math.floor(value)


@builtin("ceil", ["number"], "number", "smallest whole number not below")
def _ceil(value):
    return math.ceil(value)


@builtin("round", ["number", "number"], "number", "rounded to the given decimals (default 0)", optional=1)
def _round(value, digits=0):
    digits = int(digits)
    return round(value) if digits == 0 else round(value, max(-20, min(20, digits)))


@builtin("div", ["number", "number"], "number", "integer division truncating toward zero, as Go's int64 `/` "
         "(div(7, 2) is 3, div(-7, 2) is -3); null when b is 0 or either is not a whole number")
def _div(a, b):
    if b == 0 or a != math.floor(a) or b != math.floor(b):
        return None
    a, b = int(a), int(b)
    quotient = abs(a) // abs(b)
    return quotient if (a >= 0) == (b >= 0) else -quotient


@builtin("sqrt", ["number"], "number", "square root (as Go's math.Sqrt); null for a negative number")
def _sqrt(value):
    return math.sqrt(value) if value >= 0 else None


# --- nulls ---------------------------------------------------------------------------------------

@builtin("has", ["any"], "bool", "the value is present and not null: has(task.annotations.zone)", nulls=True)
def _has(value):
    return value is not None


@builtin("default", ["T", "T"], _same_as_first, "the first value unless it is null, else the second "
         "(the same as x ?? v)", nulls=True)
def _default(value, fallback):
    return fallback if value is None else value


# --- Kubernetes ----------------------------------------------------------------------------------

@builtin("tolerates", ["list[toleration]", "taint|list[taint]"], "bool",
         "Kubernetes toleration semantics: the tolerations tolerate the taint; for a list of taints, "
         "every NoSchedule and NoExecute taint (PreferNoSchedule is ignored, as the scheduler does)")
def _tolerates(tolerations, taints):
    if isinstance(taints, list):
        hard = [t for t in taints if getattr(t, "effect", None) in ("NoSchedule", "NoExecute")]
        return all(_tolerated(tolerations, t) for t in hard)
    return _tolerated(tolerations, taints)


def _tolerated(tolerations, taint) -> bool:
    return any(_toleration_matches(t, taint) for t in tolerations if t is not None)


def _toleration_matches(toleration, taint) -> bool:
    """k8s.io/api/core/v1 Toleration.ToleratesTaint."""
    effect = getattr(toleration, "effect", None)
    if effect and effect != getattr(taint, "effect", None):
        return False
    key = getattr(toleration, "key", None)
    if key and key != getattr(taint, "key", None):
        return False
    operator = getattr(toleration, "operator", None) or "Equal"
    if operator == "Exists":
        return True
    return operator == "Equal" and (getattr(toleration, "value", None) or "") == (getattr(taint, "value", None) or "")
