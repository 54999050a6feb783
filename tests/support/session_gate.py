"""A policy set that shows whether a call was decided with this cycle's session: ``in-session``
rejects every node without a session ("no session"), ``small-gang`` rejects when the snapshot's
job of the sample predicate's task has ``MinAvailable`` 5 or more ("gang too big"). An open with
``open_body(7)`` then a predicate answers "gang too big" while the session holds, "no session"
once it is gone, and a pass when it holds with ``open_body(2)``: what the served store tests read."""

from __future__ import annotations

import json

from tests.support.bodies import SAMPLES
from tests.support.volcano import VolcanoClient

#: the sample predicate's task's job
JOB = "ml/job-002-8379799c-38b5-481a-ad2d-f76627ecc4bd"
POLICIES = {"session.policy": """\
filter in-session: session.open
  reason "no session"
filter small-gang: task.job.min_available < 5
  reason "gang too big"
"""}


def open_doc(min_available: int) -> dict:
    """The sample onSessionOpen body with the predicate's job at ``min_available``."""
    opened = json.loads((SAMPLES / "onSessionOpen.json").read_bytes())
    opened["Jobs"][JOB]["MinAvailable"] = min_available
    return opened


def open_body(min_available: int) -> bytes:
    return json.dumps(open_doc(min_available)).encode()


def gate_answers(client: VolcanoClient, times: int) -> list[tuple[int, str]]:
    """``times`` sample predicates, each on a new connection (so every worker answers some):
    (HTTP status, the rejecting reason or '' for a pass or a non-200)."""
    data = (SAMPLES / "predicate.json").read_bytes()
    answers = client.parallel_map(lambda _: client.raw("predicate", data, fresh=True), range(times))
    return [(status, json.loads(answer).get("status", "").rsplit(": ", 1)[-1] if status == 200 else "")
            for status, answer in answers]
