"""The checker's hints: "did you mean", the names a rule can read, and the friendlier errors for
what a newcomer writes (a dashed or dotted map key, an unquoted word, a string compared with a
number or a bool). ``Hints`` is mixed into ``checker.Checker``; the functions are its helpers."""

from __future__ import annotations

import difflib
import functools
import re
from typing import TYPE_CHECKING

from policy_extender import schema
from policy_extender.errors import Span
from policy_extender.lang import ast, codes, types
from policy_extender.lang.parser import parse_expression
from policy_extender.lang.syntax import Locator
from policy_extender.lang.scope import ALL_ROOTS, Scope, Typed

_STRING_MAPS = ("labels", "annotations", "node_selector", "conditions")


class Hints:
    """The hint-writing half of ``checker.Checker`` (which defines what is declared here)."""

    sources: dict[str, str]
    types: dict[int, str]

    if TYPE_CHECKING:
        def error(self, code: str, message: str, span: Span, hint: str | None = None) -> Typed: ...

        def expr(self, node, scope: Scope) -> Typed: ...

    def modifier_hint(self, span: Span) -> str:
        lines = self.sources.get(span.file, "").split("\n")
        before = lines[span.line - 2] if 2 <= span.line <= len(lines) + 1 else ""
        code = re.sub(r'"(?:\\.|[^"\\])*"|\'(?:\\.|[^\'\\])*\'|#.*', " ", before).rstrip()
        op = re.search(r"(?<![A-Za-z0-9_.])(and|or)$", code)
        if op and span.column > 1:
            return (f"'{op.group(1)}' at the end of line {span.line - 1} has nothing after it: finish the "
                    f"condition or remove '{op.group(1)}'")
        return "a modifier goes on its own indented line after the rule's expression"

    def dotted_key_hint(self, node: ast.FieldAccess) -> str | None:
        """``task.annotations.scheduling.example.com/allow``: a map key with dots written after a
        dot; the hint writes the whole key in brackets."""
        key_of = node.obj
        if not isinstance(key_of, ast.FieldAccess) or not types.is_map(self.types.get(id(key_of.obj), "")):
            return None
        span = key_of.name_span
        line = self.sources.get(span.file, "").split("\n")[span.line - 1] if span.file in self.sources else ""
        key = re.match(r"[A-Za-z0-9_./-]+", line[span.column - 1:])
        if key is None:
            return None
        return f'a key with dots is written in brackets: {self.text(key_of.obj.span)}["{key.group()}"]'

    def dashed_key(self, node: ast.Binary, scope: Scope) -> Typed | None:
        """``task.annotations.allow-any-gpu``: a map key with '-' written after a dot reads as a
        subtraction; reported once, with the bracketed key, and typed as the map's values."""
        parts: list = []
        left: ast.Expr = node
        while isinstance(left, ast.Binary) and left.op == "-":
            parts.insert(0, left.right)
            left = left.left
        text = self.text(node.span)
        if not isinstance(left, ast.FieldAccess) or not re.fullmatch(r"[^\s]*\.[A-Za-z0-9_]+(-[A-Za-z0-9_]+)+", text) \
                or not all(isinstance(p, ast.Name) or (isinstance(p, ast.Literal) and isinstance(p.value, int)
                                                       and not isinstance(p.value, bool)) for p in parts):
            return None
        owner = self.expr(left.obj, scope).type
        if not types.is_map(owner) or (types.element(owner) != "string"
                                       and all(not self.unknown_name(p.name, scope) for p in parts
                                               if isinstance(p, ast.Name))):
            return None
        for part in (left, *parts):  # typed, so that nothing else is reported about them
            self.types[id(part)] = "any"
        key = text[len(self.text(left.obj.span)) + 1:]
        span = Span(left.name_span.file, left.name_span.line, left.name_span.column, node.span.end_line,
                    node.span.end_column)
        self.error(codes.E205, f"'{key}' after a dot reads as a subtraction ({' - '.join(key.split('-'))})",
                   span, f"a key with '-' is written in brackets: {self.text(left.obj.span)}[\"{key}\"]")
        return Typed(types.element(owner))  # type: ignore[arg-type]  # a map type has an element

    def unquoted_words(self, node: ast.Binary, scope: Scope) -> Typed | None:
        """``node.labels.zone == zone-a``: unknown names where a string fits are reported with a
        hint to quote them (and typed as strings, so nothing else is reported about them)."""
        words = {"left": self.bare_word(node.left, scope), "right": self.bare_word(node.right, scope)}
        items = node.right.items if isinstance(node.right, ast.ListLit) and node.op in ("in", "not in") else ()
        listed = [(item, self.bare_word(item, scope)) for item in items]
        if not any(words.values()) and not any(w for _, w in listed):
            return None
        if (words["left"] and words["right"]) or isinstance(node.left, ast.Literal) \
                or isinstance(node.right, ast.Literal):
            return None  # nothing says a string is meant (or a string is right there): plain errors
        if words["left"]:
            other = self.expr(node.right, scope).type
            fits = other == "string" if node.op not in ("in", "not in") else \
                (other == "string" or types.is_map(other) or types.element(other) == "string")
            quoted: list[tuple[ast.Expr, str]] = [(node.left, words["left"])] if fits else []
        else:
            other = self.expr(node.left, scope).type
            quoted = [(node.right, words["right"])] if words["right"] else \
                [(item, word) for item, word in listed if word]
            if other != "string":
                quoted = []
            for item, word in listed:
                if not word:
                    self.expr(item, scope)
        if not quoted:
            return None if not listed else self.finish_list(node, scope)
        for word_node, word in quoted:
            self.types[id(word_node)] = "string"
            self.error(codes.E202, f"unknown name '{word}'", word_node.span,
                       f"a string is written in quotes: '{word}'")
        return Typed("bool")

    def finish_list(self, node: ast.Binary, scope: Scope) -> Typed:
        """The list's own type once its items were checked one by one."""
        items = [self.types.get(id(i), "any") for i in node.right.items]  # type: ignore[union-attr]  # a list literal
        element = "null"
        for t in items:
            element = types.unify(element, t) or "any"
        self.types[id(node.right)] = f"list[{'any' if element == 'null' else element}]"
        return Typed("bool")

    def bare_word(self, node, scope: Scope) -> str | None:
        """The text of an unknown name, or of unknown names and numbers joined by '-' (zone-a)."""
        parts, stack = [], [node]
        while stack:
            part = stack.pop()
            if isinstance(part, ast.Binary) and part.op == "-":
                stack += [part.left, part.right]
            elif isinstance(part, (ast.Name, ast.Literal)):
                parts.append(part)
            else:
                return None
        names = [p.name for p in parts if isinstance(p, ast.Name)]
        known = [*scope.vars, *scope.lets, *ALL_ROOTS, *schema.SHORTHANDS]
        if not names or any(not self.unknown_name(n, scope) for n in names) or did_you_mean(names[0], known) \
                or any(isinstance(p, ast.Literal) and not isinstance(p.value, int) for p in parts):
            return None
        text = self.text(node.span)
        return text if re.fullmatch(r"[A-Za-z0-9_-]+", text) else None

    @staticmethod
    def unknown_name(name: str, scope: Scope) -> bool:
        return not (name in scope.vars or name in scope.lets or name in ALL_ROOTS or name in schema.SHORTHANDS)

    def bool_hint(self, node: ast.Binary) -> str | None:
        """``annotations are strings: write "true"`` for a string compared with ``true``/``false``."""
        for side, other in ((node.left, node.right), (node.right, node.left)):
            if self.types.get(id(side)) == "string" and isinstance(other, ast.Literal) \
                    and isinstance(other.value, bool):
                read = side
                while isinstance(read, ast.Binary) and read.op == "-":  # a dashed key (E205)
                    read = read.left
                owner = read.obj if isinstance(read, (ast.FieldAccess, ast.Index)) else None
                what = owner.name if isinstance(owner, ast.FieldAccess) and owner.name in _STRING_MAPS \
                    else self.text(side.span)
                are = "are strings" if what in _STRING_MAPS else "is a string"
                return f'{what} {are}: compare with "{str(other.value).lower()}"'
        return None

    def string_hint(self, node: ast.Binary) -> str | None:
        """``labels are strings: compare number(node.labels.x)`` for a string-map read beside a number."""
        for side, other in ((node.left, node.right), (node.right, node.left)):
            if self.types.get(id(side)) == "string" and self.types.get(id(other)) == "number":
                owner = side.obj if isinstance(side, (ast.FieldAccess, ast.Index)) else None
                if isinstance(owner, ast.FieldAccess) and owner.name in _STRING_MAPS:
                    return f"{owner.name} are strings: compare number({self.text(side.span)})"
                return f"convert the string with number({self.text(side.span)})"
        return None

    def object_hint(self, node: ast.Binary) -> str | None:
        """``compare one of its fields: session.job.tasks >= 2`` for an object with number fields
        (``counts``, ``resources``) compared with a number."""
        for side, other in ((node.left, node.right), (node.right, node.left)):
            fields = schema.TYPES.get(self.types.get(id(side), ""), {})
            numbers = [name for name, f in fields.items() if f.type == "number"]
            if numbers and self.types.get(id(other)) == "number":
                read = f"{self.text(side.span)}.{numbers[0]}"
                written = f"{read} {node.op} {self.text(other.span)}" if side is node.left \
                    else f"{self.text(other.span)} {node.op} {read}"
                return (f"compare one of its fields ({', '.join('.' + n for n in numbers)}), e.g. {written}")
        return None

    def text(self, span: Span) -> str:
        lines = self.sources.get(span.file, "").split("\n")
        if span.line == span.end_line and span.line <= len(lines):
            return lines[span.line - 1][span.column - 1:span.end_column - 1]
        return "..."


@functools.lru_cache(maxsize=None)
def parsed_shorthand(name: str):
    text = schema.SHORTHANDS[name][0]
    return parse_expression(text, Locator(f"<shorthand {name}>"))


def did_you_mean(name: str, candidates) -> str:
    close = difflib.get_close_matches(name, list(candidates), n=1, cutoff=0.6)
    return f" (did you mean '{close[0]}'?)" if close else ""


def name_hint(scope: Scope) -> str:
    roots = schema.DECISION_ROOTS[scope.kind] if scope.kind else ALL_ROOTS
    return f"names here: {', '.join([*roots, *shorthands_of(scope.kind), *scope.lets, *scope.vars])}"


@functools.lru_cache(maxsize=None)
def shorthands_of(kind: str | None) -> tuple[str, ...]:
    """The shorthands a rule of ``kind`` can use: those whose expansion reads only its names
    (``free_gpu`` reads node: not in an enqueue rule); every one outside a rule."""
    if kind is None:
        return tuple(schema.SHORTHANDS)
    roots = schema.DECISION_ROOTS[kind]
    return tuple(name for name in schema.SHORTHANDS if all(n in roots for n in _names_in(parsed_shorthand(name))))


def _names_in(node) -> set[str]:
    """The names an expression reads."""
    found, stack = set(), [node]
    while stack:
        part = stack.pop()
        if isinstance(part, ast.Name):
            found.add(part.name)
        stack.extend(ast.children(part))
    return found


def resource_hint(name: str) -> str:
    return f"read other resources by their full name with brackets, e.g. [\"nvidia.com/{name}\"]"


#: What ``counts`` counts besides resources is ``tasks``; these words name other things, never a
#: resource: a key or field ending in one wants session.allocations.
_NOT_RESOURCES = frozenset({"task", "tasks", "job", "jobs", "node", "nodes", "queue", "queues",
                            "allocation", "allocations", "eviction", "evictions"})
#: Kubernetes resource names without a domain (any other resource is "domain/name").
_NATIVE_RESOURCES = frozenset({"cpu", "memory", "storage", "ephemeral-storage", "pods",
                               *schema.RESOURCE_SHORTHANDS})
_ALLOCATIONS_HINT = ("to count this cycle's allocations by job and node together, or only some of them, "
                     "aggregate over session.allocations, e.g. count(a for a in session.allocations "
                     "if a.job == task.job_id and a.node == node.name and a.requests.gpu > 0)")
_COUNTS_FIELDS = "counts has .tasks and the resources .cpu, .memory, .gpu, .pods, .ephemeral_storage"


def counts_hint(name: str) -> str:
    """The hint for an unknown field on ``counts`` (never a made-up resource name)."""
    if name.lower() in _NOT_RESOURCES:
        return f"{_COUNTS_FIELDS}; {_ALLOCATIONS_HINT}"
    return f"{_COUNTS_FIELDS}; read another resource by its full name in brackets, e.g. [\"nvidia.com/gpumem\"]"


def counts_key_problem(key: str) -> tuple[str, str] | None:
    """(message, hint) when ``counts[key]`` can only read 0: ``key`` names no resource."""
    last = key.rsplit("/", 1)[-1]
    if key in ("tasks", "task"):
        return (f"unknown key '{key}' on counts: the number of tasks is a field",
                "write .tasks, e.g. session.node.tasks")
    if last.lower() in _NOT_RESOURCES:
        return (f"unknown key '{key}' on counts: counts holds the number of tasks and resource amounts, "
                f"not {last}", _ALLOCATIONS_HINT)
    if "/" not in key and key not in _NATIVE_RESOURCES and not key.startswith(("hugepages-", "attachable-volumes-")):
        return (f"unknown key '{key}' on counts: a resource other than cpu, memory, storage, "
                "ephemeral-storage, pods and hugepages-* is named with its domain",
                f"{_COUNTS_FIELDS}; read another resource by its full name, e.g. [\"nvidia.com/gpumem\"]")
    return None


def result_hint(kind: str) -> str:
    return "a score rule computes a number" if kind == "score" else f"a {kind} rule is a condition"


def with_article(word: str) -> str:
    return f"an {word}" if word[0] in "aeiou" else f"a {word}"


def a_type(pattern: str) -> str:
    return " or ".join(types.describe(p) for p in pattern.split("|"))
