"""The policy texts the reload tests write: good versions told apart by a score, and broken ones.

Uses the real compiler (``policy_extender.policyset.compile_sources``) so a "broken" set is one the
product really refuses.
"""

from __future__ import annotations

from policy_extender.errors import PolicyError
from policy_extender.policyset import compile_sources


class Language:
    compile = staticmethod(compile_sources)
    error_type = PolicyError

    def good(self, score: int) -> str:
        """A policy set whose prioritize answers ``score`` for every node."""
        return f"score {score}\n"

    def broken(self) -> str:
        """Text the checker refuses, with the error on line 2."""
        return "score 1\nscore 1 +\n"

    def score_in(self, text: str) -> int:
        """The score a ``good(score)`` text gives."""
        return int(text.split()[1])

    def score_of(self, policy_set) -> int:
        """The score a policy set made of ``good`` texts gives every node (rules add up)."""
        return sum(self.score_in(text) for text in policy_set.sources.values())
