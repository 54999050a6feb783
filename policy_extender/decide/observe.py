"""After a verb decided: its audit rules, their metric, and the decision tally (one step per verb).

The verb handler (``decide/handlers.py``) builds its verb's step once (:func:`after`) and calls
it after each decision, with what it decoded: the step evaluates the set's audit (shadow) rules of
that verb (its verb table entry's ``audit``; ``audit.py``, nothing without any), counts their
outcomes (``policy_extender_audit_decisions_total``) and adds the call to this worker's tally (its
entry's ``tally``; ``tallying.py``, memory only, never the store), in the env's cycle or the one
given (kube-scheduler's calls, which have no session: a window of time, ``tallying.window_head``). The tally keys on task and job
``Namespace``/``Name``, which every decoder keeps (``wire.paths.ALWAYS_READ``).
"""

from __future__ import annotations

from typing import Any, Protocol

from policy_extender import metrics
from policy_extender.decide.audit import AuditedSet
from policy_extender.decide.table import Verb
from policy_extender.decide.worker_state import WorkerState
from policy_extender.decide.tally_shapes import PredicateShape
from policy_extender.logs import current_request_id

class Step(Protocol):
    """What is done after one decision; ``head``: the cycle to tally the call in when it is not the
    env's (a call without a session: ``tallying.window_head``)."""

    def __call__(self, service: WorkerState, policy_set: AuditedSet, env: Any, request: Any, decision: Any,
                 outcome: str, head: Any = None) -> None: ...


def after(verb: Verb) -> Step:
    """What is done after each decision of the deciding ``verb``: audit it, count it, tally it."""
    name, evaluate, shape = verb.name, verb.audit, verb.tally
    if evaluate is None or shape is None:
        raise ValueError(f"{name} is not a deciding verb (its table entry has no audit or tally)")
    record = shape.record
    counted = not isinstance(shape, PredicateShape)  # the predicate's calls are counted as its tally folds them

    def step(service: WorkerState, policy_set: AuditedSet, env: Any, request: Any, decision: Any, outcome: str,
             head: Any = None) -> None:
        audits = evaluate(policy_set, request, env) if policy_set.audited else ()
        if audits:
            metrics.note_audits(audits)
        cycle = head if head is not None else getattr(env, "head", None)
        record(service.tally, cycle, name, request, decision, outcome, audits, current_request_id())
        if counted:
            service.tally.note_call(cycle, name)
    return step
