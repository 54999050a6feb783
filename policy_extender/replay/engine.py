"""Replaying recorded calls through an in-process service on one policy set.

The service is the fixture runner's ``fixtures.exchange.Exchanger`` (a real ``web.service.Service``
with its own SQLite session store), called through the service's own WSGI verb dispatch
(``web.dispatch.VerbDispatch``): the body is read, decoded pruned to the set's reads, decided
and encoded exactly as under gunicorn, and errors become the same HTTP statuses.

A cycle replays in recorded order: onSessionOpen builds the snapshot env, allocate/deallocate
events move the session counters as they moved then, and each decision sees that state.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from typing import Any, Iterator

from .reading import Call, Cycle

#: Verbs whose answer is a decision worth comparing.
DECIDING = ("predicate", "prioritize", "preemptable", "reclaimable", "jobEnqueueable",
            "queueOverused", "jobReady")


@dataclass(frozen=True)
class Answer:
    status: int
    body: bytes


@dataclass(frozen=True)
class Replayed:
    """A recorded call, its index in the cycle, and the answer of the replaying policy set."""

    index: int
    call: Call
    answer: Answer


class Replayer:
    """One in-process service answering with ``policy_set``."""

    def __init__(self, policy_set: Any) -> None:
        from policy_extender.fixtures.exchange import Exchanger
        from policy_extender.web.dispatch import VerbDispatch
        self.policy_set = policy_set
        self.exchanger = Exchanger(policy_set)
        service = self.exchanger.service
        self.dispatch = VerbDispatch(service, _no_route)
        self.paths = {kind: path for path, kind in service.routes.items()}

    def call(self, verb: str, body: bytes) -> Answer:
        """The service's answer to one body, as Volcano would receive it."""
        environ = {"REQUEST_METHOD": "POST", "PATH_INFO": self.paths[verb],
                   "CONTENT_TYPE": "application/json", "CONTENT_LENGTH": str(len(body)),
                   "wsgi.input": io.BytesIO(body)}
        status: list[int] = []
        chunks = self.dispatch(environ, lambda line, headers: status.append(int(line.split()[0])))
        return Answer(status[0], b"".join(chunks))

    def decision(self, verb: str, body: bytes) -> Any:
        """The decision object behind an answer (the deciding rule), in the current session."""
        return self.exchanger.decision(verb, body)

    def replay(self, cycle: Cycle) -> Iterator[Replayed]:
        """Every call of ``cycle`` in order, each answered after the ones before it; the session
        of an earlier cycle is closed first so nothing leaks between cycles. Decision objects are
        asked for (``decision``) while the generator is paused on a call: same session state."""
        self.call("onSessionClose", b"{}")
        for index, call in enumerate(cycle.calls, 1):
            yield Replayed(index, call, self.call(call.verb, call.request))
        self.call("onSessionClose", b"{}")


def _no_route(environ: dict, start_response) -> list[bytes]:
    start_response("404 Not Found", [("Content-Type", "application/json")])
    return [b'{"error": "not a verb path"}']
