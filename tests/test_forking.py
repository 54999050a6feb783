"""The fork helper of the tests fails, rather than hangs, on a child that never answers."""

import time

import pytest

from tests.forking import in_forked_child

pytestmark = pytest.mark.slow


def test_a_child_that_never_answers_fails_after_the_deadline():
    started = time.monotonic()
    with pytest.raises(AssertionError, match="no answer in 1 s"):
        in_forked_child(lambda: time.sleep(600) or "", deadline=1)
    assert time.monotonic() - started < 30


def test_a_child_that_raises_fails_and_one_that_answers_gives_its_text():
    with pytest.raises(AssertionError, match="raised"):
        in_forked_child(lambda: 1 / 0)
    assert in_forked_child(lambda: "ok") == "ok"
