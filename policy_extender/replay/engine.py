"""Replaying recorded calls through an in-process service on one policy set.

The service is the fixture runner's ``fixtures.exchange.Exchanger`` (a real ``service.Service``
with its own SQLite session store), answering through ``decide.handlers.respond``, the function
the HTTP dispatch calls: the body is decoded pruned to the set's reads, decided and encoded
exactly as under gunicorn, and errors become the same statuses.

A cycle replays in recorded order: onSessionOpen builds the snapshot env, allocate/deallocate
events move the session counters as they moved then, and each decision sees that state.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterator

from policy_extender.decide.handlers import respond
from policy_extender.decide.kube_table import KUBE_VERBS
from policy_extender.fixture_runner.exchange import Exchanger
from policy_extender.verb_names.volcano import ON_SESSION_CLOSE
from policy_extender.wire.session_views import NO_SESSION

from .reading import RecordedCall, RecordedCycle


@dataclass(frozen=True)
class HttpAnswer:
    status: int
    body: bytes


@dataclass(frozen=True)
class Replayed:
    """A recorded call, its index in the cycle, and the answer of the replaying policy set."""

    index: int
    call: RecordedCall
    answer: HttpAnswer


class Replayer:
    """One in-process service answering with ``policy_set``."""

    def __init__(self, policy_set: Any) -> None:
        self.policy_set = policy_set
        self.exchanger = Exchanger(policy_set)

    def call(self, verb: str, body: bytes) -> HttpAnswer:
        """The service's answer to one body, as Volcano would receive it."""
        reply = respond(self.exchanger.service, verb, body)
        return HttpAnswer(reply.status, reply.body)

    def decision(self, verb: str, body: bytes) -> Any:
        """The decision object behind an answer (the deciding rule), in the current session; a
        kube-scheduler call's with the set's kube-scheduler rules and no session, as it is answered."""
        entry = KUBE_VERBS.get(verb)
        if entry is not None and entry.decide is not None:
            policy_set = self.policy_set.for_protocol(entry.protocol)
            return entry.decide(policy_set, entry.decode(body, policy_set.reads, NO_SESSION), NO_SESSION)
        return self.exchanger.decision(verb, body)

    def replay(self, cycle: RecordedCycle) -> Iterator[Replayed]:
        """Every call of ``cycle`` in order, each answered after the ones before it; the session
        of an earlier cycle is closed first so nothing leaks between cycles. Decision objects are
        asked for (``decision``) while the generator is paused on a call: same session state."""
        self.call(ON_SESSION_CLOSE, b"{}")
        for index, call in enumerate(cycle.calls, 1):
            yield Replayed(index, call, self.call(call.verb, call.request))
        self.call(ON_SESSION_CLOSE, b"{}")

