"""The fork helper of the tests fails, rather than hangs, on a child that never answers."""

import time

import pytest

from tests.support.forking import in_forked_child

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


def test_it_works_when_the_process_already_holds_more_than_1024_descriptors():
    """A whole suite's run holds over a thousand descriptors by its end; select() cannot wait on
    one numbered above 1023 ("filedescriptor out of range in select()")."""
    import os
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if max(soft, hard) < 1200:
        pytest.skip(f"this machine allows {hard} open descriptors")
    if soft < 1200:
        resource.setrlimit(resource.RLIMIT_NOFILE, (1200, hard))
    held = []
    try:
        while not held or held[-1] < 1030:
            held.append(os.dup(0 if not held else held[0]))
        assert in_forked_child(lambda: "ok") == "ok"
    finally:
        for fd in held:
            os.close(fd)
