"""Type expressions of the checker: ``number string bool any null``, object type names from
``schema.TYPES``, ``list[T]`` and ``map[T]``; a parameter pattern may also be ``list``/``map``
(any element type), ``T`` (the same type as the other ``T`` arguments) or ``a|b`` alternatives."""

from __future__ import annotations

SCALARS = frozenset({"number", "string", "bool"})


def element(type_: str) -> str | None:
    """``T`` of ``list[T]`` / ``map[T]``, else None."""
    if type_.endswith("]") and (type_.startswith("list[") or type_.startswith("map[")):
        return type_[type_.index("[") + 1:-1]
    return None


def is_list(type_: str) -> bool:
    return type_.startswith("list[")


def is_map(type_: str) -> bool:
    return type_.startswith("map[")


def loose(type_: str) -> bool:
    """A type the checker cannot say anything against (``any``, or the ``null`` literal)."""
    return type_ in ("any", "null")


def accepts(pattern: str, actual: str) -> bool:
    """Whether an argument of type ``actual`` fits parameter ``pattern``."""
    if loose(actual) or pattern in ("any", "T"):
        return True
    if "|" in pattern:
        return any(accepts(p, actual) for p in pattern.split("|"))
    if pattern == "list":
        return is_list(actual)
    if pattern == "map":
        return is_map(actual)
    if (pattern_element := element(pattern)) and (actual_element := element(actual)):
        return pattern[:4] == actual[:4] and accepts(pattern_element, actual_element)
    return pattern == actual


def unify(a: str, b: str) -> str | None:
    """The type of a value that is either an ``a`` or a ``b``; None when they do not fit."""
    if a == b or b == "null":
        return a
    if a == "null":
        return b
    if a == "any" or b == "any":
        return "any"
    if (a_element := element(a)) and (b_element := element(b)) and a[:4] == b[:4]:
        inner = unify(a_element, b_element)
        return f"{a[:a.index('[')]}[{inner}]" if inner else None
    return None


def describe(type_: str) -> str:
    """How a type reads in a message: ``a number``, ``a list[string]``, ``null``."""
    if type_ in ("null", "any"):
        return type_
    return f"an {type_}" if type_[0] in "aeiou" else f"a {type_}"
