"""A mapped request body (32 MiB and more) is released after gunicorn has written the answer
(``close``), not before: unmapping a 268 MB body takes 10-20 ms the client need not wait for."""

from __future__ import annotations

import gc
import mmap
import weakref

from policy_extender.web.dispatch import AnswerThenRelease


def test_the_body_lives_until_the_answer_is_closed():
    body = mmap.mmap(-1, 1 << 20)
    alive = weakref.ref(body)
    answer = AnswerThenRelease(b"{}", body)
    del body
    gc.collect()
    assert list(answer) == [b"{}"]
    assert alive() is not None, "released before the answer was sent"
    answer.close()
    gc.collect()
    assert alive() is None, "still held after the answer was sent"
