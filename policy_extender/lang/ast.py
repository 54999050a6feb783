"""The policy AST: small frozen dataclasses, each carrying the source span it was built from."""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any, Union

from policy_extender.errors import Span


@dataclass(frozen=True)
class Literal:
    value: object  # int | float | str | bool | None
    span: Span


@dataclass(frozen=True)
class ListLit:
    items: tuple["Expr", ...]
    span: Span


@dataclass(frozen=True)
class Name:
    name: str
    span: Span


@dataclass(frozen=True)
class FieldAccess:
    obj: "Expr"
    name: str
    name_span: Span
    span: Span


@dataclass(frozen=True)
class Index:
    obj: "Expr"
    key: "Expr"
    span: Span


@dataclass(frozen=True)
class Call:
    func: str
    args: tuple["Expr", ...]
    func_span: Span
    span: Span


@dataclass(frozen=True)
class Unary:
    op: str  # "-" or "not"
    operand: "Expr"
    span: Span


@dataclass(frozen=True)
class Binary:
    op: str  # + - * / % ?? == != < <= > >= in "not in" and or
    left: "Expr"
    right: "Expr"
    op_span: Span
    span: Span


@dataclass(frozen=True)
class Cond:
    test: "Expr"
    then: "Expr"
    orelse: "Expr"
    span: Span


@dataclass(frozen=True)
class Aggregate:
    func: str  # sum count any all min max
    elem: "Expr"
    var: str
    var_span: Span
    iterable: "Expr"
    cond: "Expr | None"
    span: Span


@dataclass(frozen=True)
class Template:
    """A ``reason`` string: literal text and ``{expr}`` holes, in order."""
    parts: tuple[Union[str, "Expr"], ...]
    span: Span


Expr = Union[Literal, ListLit, Name, FieldAccess, Index, Call, Unary, Binary, Cond, Aggregate]

COMPARISONS = frozenset({"==", "!=", "<", "<=", ">", ">=", "in", "not in"})
ARITHMETIC = frozenset({"+", "-", "*", "/", "%"})
AGGREGATES = ("sum", "count", "any", "all", "min", "max")


@dataclass(frozen=True)
class Modifier:
    kind: str  # when reason unresolvable weight normalize permit "if none" audit
    value: Any  # Expr | Template | number or Name | (lo, hi) | "abstain"/"permit" | None
    span: Span


@dataclass(frozen=True)
class RuleStatement:
    kind: str
    name: str | None  # None: unnamed, named "<file>:<line>" by the checker
    name_span: Span
    expr: Expr
    modifiers: tuple[Modifier, ...]
    span: Span


@dataclass(frozen=True)
class Let:
    name: str
    expr: Expr
    span: Span
    #: ``shared let``: visible to every file of the set, not only its own
    shared: bool = False


@dataclass(frozen=True)
class Param:
    """``param NAME: TYPE = DEFAULT``: a typed constant of its file that the set's values file
    may set (``lang.values``); ``type`` is number, string, bool or map[number]."""
    name: str
    type: str
    default: object  # int | float | str | bool | dict[str, int | float]
    name_span: Span
    type_span: Span
    default_span: Span
    span: Span


@dataclass(frozen=True)
class Guard:
    expr: Expr
    span: Span


@dataclass(frozen=True)
class Audit:
    """The file-level ``audit`` marker: every rule of the file is a shadow (audit) rule."""
    span: Span


@dataclass(frozen=True)
class Protocol:
    """The file-level ``protocol`` statement: the schedulers whose verbs the file's rules serve
    (``volcano``, ``kube-scheduler``); without one a file serves Volcano."""
    names: tuple[str, ...]
    name_spans: tuple[Span, ...]
    span: Span


Statement = Union[RuleStatement, Let, Guard, Audit, Protocol, Param]


@dataclass(frozen=True)
class PolicyFile:
    name: str
    source: str
    statements: tuple[Statement, ...]


def children(node: Any) -> list:
    """The sub-expressions of an expression node, in source order."""
    out: list = []
    for f in fields(node):
        value = getattr(node, f.name)
        if isinstance(value, tuple):
            out.extend(v for v in value if _is_node(v))
        elif _is_node(value):
            out.append(value)
    return out


def _is_node(value: object) -> bool:
    return hasattr(value, "span") and not isinstance(value, Span)


def respan(node: Any, span: Span) -> Any:
    """A copy of ``node`` and all its sub-nodes with every span replaced by ``span``."""
    changes: dict[str, object] = {}
    for f in fields(node):
        value = getattr(node, f.name)
        if isinstance(value, Span):
            changes[f.name] = span
        elif isinstance(value, tuple):
            changes[f.name] = tuple(respan(v, span) if _is_node(v) else v for v in value)
        elif _is_node(value):
            changes[f.name] = respan(value, span)
    return replace(node, **changes)
