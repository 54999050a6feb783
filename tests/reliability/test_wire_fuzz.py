"""Mutated Volcano bodies of every verb through the verb handlers with every bundled policy (small
profile; ``python -m tests.tools.wire_fuzz --bodies 20000 --seed N`` is the long run): every
answer is JSON and none is a 500 (docs/reliability.md, "Found and fixed", 6)."""

from __future__ import annotations

import logging
import re

import pytest

from tests.tools import wire_fuzz


@pytest.mark.parametrize("seed", [1, 2])
@pytest.mark.slow
def test_mutated_bodies_get_json_answers_and_no_500(seed):
    logging.disable(logging.CRITICAL)
    try:
        answers, failures = wire_fuzz.run(1200, seed)
    finally:
        logging.disable(logging.NOTSET)
    assert not failures, failures[:3]
    verbs = {verb for verb, _ in answers}
    statuses = {status for _, status in answers}
    assert len(verbs) == 11 and {200, 400} <= statuses, answers  # every verb but close; answers and refusals


@pytest.mark.slow
def test_a_real_serve_answers_mutated_bodies_as_the_handlers_do():
    """Under gunicorn an open is decoded while it arrives and predicates reuse the nodes a worker
    kept; in process the whole body is decoded at once. The same mutated bodies in the same order
    get the same status and the same answer (decisions included: both saw the same opens), and
    none is a 500 but a language bound's (an open holding an int past 64 bits was, on both sides)."""
    answers, differences, log = wire_fuzz.served_differences(240, seed=5)
    assert not differences, differences[:3]
    assert {status for _, status in answers} >= {200, 400}, answers
    assert answers[("onSessionOpen", 200)] >= 40, answers  # most opens taken, so decisions run on sessions
    raised = re.findall(r"^([A-Za-z_][\w.]*): ", log, re.MULTILINE)  # each traceback's last line
    assert len(raised) == log.count("Traceback") and all(name.endswith(".EvalError") for name in raised), raised
