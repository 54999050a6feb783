"""A whole recording through a candidate policy set, compared with the recorded answers (or, with
``current``, with a second policy set replaying the same calls).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterator

from policy_extender.decide import kube_table
from policy_extender.decide.table import DECIDING as VOLCANO_DECIDING

from . import diff
from .engine import HttpAnswer, Replayed, Replayer
from policy_extender.record.frames import Problem
from .reading import RecordedCycle, read_cycles

#: the verbs whose answers are compared: both protocols' deciding verbs
DECIDING = frozenset(VOLCANO_DECIDING) | frozenset(kube_table.DECIDING)


@dataclass
class Outcome:
    cycles: int = 0
    calls: int = 0
    decisions: int = 0
    changes: list[diff.DecisionChange] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)      # incomplete or unreplayable cycles


def compare_recording(directory: str, candidate: Any, current: Any | None = None,
                      options: diff.Options = diff.Options()) -> Outcome:
    outcome = Outcome()
    after = Replayer(candidate)
    before = Replayer(current) if current is not None else None
    for cycle in read_cycles(directory, outcome.problems):
        if _replayable(cycle, outcome):
            _compare_cycle(cycle, after, before, options, outcome)
    return outcome


def _replayable(cycle: RecordedCycle, outcome: Outcome) -> bool:
    if cycle.session_id and not cycle.opens:
        outcome.notes.append(f"{cycle.name}: no onSessionOpen (recording started mid-cycle, or "
                             "its record was damaged): cycle skipped, its decisions need the "
                             "snapshot")
        return False
    if cycle.dropped:
        outcome.notes.append(f"{cycle.name}: {cycle.dropped} calls were dropped while recording "
                             "(queue full): later decisions may differ for that reason")
    return True


def _compare_cycle(cycle: RecordedCycle, after: Replayer, before: Replayer | None, options: diff.Options,
                   outcome: Outcome) -> None:
    outcome.cycles += 1
    for new, old_answer in _pairs(cycle, after, before):
        outcome.calls += 1
        if new.call.verb not in DECIDING:  # a session event: nothing decided
            continue
        outcome.decisions += 1
        outcome.changes.extend(_changes(cycle, new, old_answer, after, options))


def _pairs(cycle: RecordedCycle, after: Replayer,
           before: Replayer | None) -> Iterator[tuple[Replayed, HttpAnswer]]:
    """(candidate's replayed call, the answer it is compared with), in lockstep."""
    if before is None:
        for new in after.replay(cycle):
            yield new, HttpAnswer(new.call.status, new.call.response)
        return
    for new, old in zip(after.replay(cycle), before.replay(cycle)):
        yield new, old.answer


def _changes(cycle: RecordedCycle, new: Replayed, old: HttpAnswer, after: Replayer,
             options: diff.Options) -> list[diff.DecisionChange]:
    call = new.call
    found = diff.compare(call.verb, old, new.answer,
                         lambda: after.decision(call.verb, call.request), options)
    if not found:
        return []
    subject = diff.subject_of(call.verb, call.request)
    return [diff.DecisionChange(cycle.name, new.index, call.verb, subject.name, node or subject.node,
                                kind, was, now, rule, call.where)
            for kind, node, was, now, rule in found]
