"""What one verb call may spend evaluating rules: ``MAX_WORK`` elements visited, and, for a call
Volcano waits for, no time past its deadline (``volcano_timeout`` after the request began to
arrive). One ``Budget`` per call, shared by every evaluation of the call: prioritize evaluates each
score rule once per node, so a budget per evaluation let a rule linear in ``cluster.nodes``
visit N x N elements per call (1.5 s at 1,000 nodes) and a quadratic one N^3 (not finished in
300 s), long after Volcano had given up on the answer (issue 44 item 4).

The caller of a verb opens the call (``begin``/``end``, around ``decide.handlers.respond``); each
``Context`` takes the call's budget on its first charge (``current``). Evaluation outside a call
(``PolicySet`` used directly: ``eval``, ``check --scale``, tests) gets one budget per ``current()``
call: a ``PolicySet`` method that evaluates several contexts takes one and hands it to each.

Spending is counted by ``lang.compiler._charge`` (``left -= cost``); the clock is read only when
``left`` falls below ``look_at``, on the call's first charge and then every ``CLOCK_EVERY``
elements, so a call already past its deadline stops at its first charge and a running one within
``CLOCK_EVERY`` elements of it (a few milliseconds).
"""

from __future__ import annotations

import threading
import time
from typing import Optional

import msgspec

from policy_extender.errors import EvalError
from policy_extender.lang import codes

MAX_WORK = 1_000_000  # elements one call may visit (aggregates, list operations), all evaluations together
CLOCK_EVERY = 4096    # elements charged between two reads of the clock


class Budget(msgspec.Struct, gc=False):
    """One call's allowance: ``left`` elements, and ``deadline`` (``time.monotonic()``; None: none).

    A msgspec Struct, as ``runtime.Context``: every verb call makes one, and its ``__init__``
    runs in C (``begin`` + ``end`` about 0.5 us a call on this machine, half a class's)."""

    left: int = MAX_WORK
    deadline: Optional[float] = None
    timeout: float = 0.0   # what the deadline was derived from, for the message
    look_at: int = MAX_WORK  # the first charge looks at the clock

    @property
    def spent(self) -> int:
        """Elements charged so far (``MAX_WORK - left``, not below 0 left)."""
        return MAX_WORK - max(self.left, 0)

    def look(self, span=None) -> None:
        """After a charge that took ``left`` below ``look_at``: E512 when nothing is left, E513
        when the deadline has passed; else the next look in ``CLOCK_EVERY`` elements."""
        if self.left < 0:
            raise EvalError(codes.E512, f"the call visited more than {MAX_WORK} elements (nested aggregates, "
                            "list operations inside one, or an aggregate in a rule evaluated once per node "
                            f"or evictee); limit {MAX_WORK}", span)
        if self.deadline is not None and time.monotonic() > self.deadline:
            raise EvalError(codes.E513, f"still evaluating {self.timeout:g} s after the call began to arrive "
                            f"(volcano_timeout): the scheduler no longer waits for this answer; "
                            f"{MAX_WORK - self.left} elements visited", span)
        self.look_at = self.left - CLOCK_EVERY


_CALL = threading.local()


def begin(deadline: float | None = None, timeout: float = 0.0) -> Budget | None:
    """Open a call on this thread with a fresh budget; returns what ``end`` restores."""
    previous = getattr(_CALL, "budget", None)
    _CALL.budget = Budget(MAX_WORK, deadline, timeout, MAX_WORK)
    return previous


def end(previous: Budget | None) -> None:
    _CALL.budget = previous


def current() -> Budget:
    """The budget of the call open on this thread, or a fresh one when none is open."""
    budget = getattr(_CALL, "budget", None)
    return budget if budget is not None else Budget()
