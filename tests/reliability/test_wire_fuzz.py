"""Mutated Volcano bodies of every verb through the verb handlers with every bundled policy (small
profile; ``python -m tests.tools.wire_fuzz --bodies 20000 --seed N`` is the long run): every
answer is JSON and none is a 500 (docs/reliability.md, "Found and fixed", 6)."""

from __future__ import annotations

import logging

import pytest

from tests.tools import wire_fuzz


@pytest.mark.parametrize("seed", [1, 2])
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
