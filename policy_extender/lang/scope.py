"""What the checker knows at a point of a policy: the roots a rule can read, a typed value and
the names in scope (shared by ``checker``, its ``params`` and its ``hints``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

from policy_extender import schema
from policy_extender.lang import ast

ALL_ROOTS = {name: t for roots in schema.DECISION_ROOTS.values() for name, t in roots.items()}
WIRE_ROOTS = ("task", "node", "job", "queue")
#: Roots whose reads are recorded like the wire roots': ``cluster`` reads the onSessionOpen body
#: (its reads decide what the session snapshot keeps: no node unless one is read); ``allocation``
#: the allocate events' tasks (what their records keep: ``wire.paths.placed_paths``)
READ_ROOTS = (*WIRE_ROOTS, "cluster", "allocation")


class Typed(NamedTuple):
    type: str
    origin: tuple[str, tuple] | None = None  # (wire root, chain of (type, field) steps to this value)


@dataclass
class Scope:
    kind: str | None              # rule kind, None when checking a let or guard on its own
    lets: dict[str, ast.Let]
    vars: dict[str, tuple[Typed, int]] = field(default_factory=dict)
    shorthand: str | None = None  # the shorthand being expanded, for messages
    #: the schedulers the file's rules serve (its ``protocol`` statement)
    protocols: frozenset[str] = schema.DEFAULT_PROTOCOLS

    def with_var(self, name: str, typed: Typed, slot: int) -> "Scope":
        return Scope(self.kind, self.lets, {**self.vars, name: (typed, slot)}, self.shorthand, self.protocols)
