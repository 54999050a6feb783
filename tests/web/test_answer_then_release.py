"""A mapped request body (32 MiB and more) is released after gunicorn has written the answer
(``close``), not before: unmapping a 268 MB body takes 10-20 ms the client need not wait for.
(With ``keep_body_maps`` on, ``close`` gives the map back instead: tests/web/test_kept_body_maps.py.)"""

from __future__ import annotations

import gc
import weakref

from policy_extender.web import socket_body
from policy_extender.web.dispatch import AnswerThenRelease


def test_the_body_lives_until_the_answer_is_closed():
    socket_body.configure(True, keep_maps=False)
    body = socket_body._buffer(socket_body.MAPPED_FROM)
    alive = weakref.ref(body)
    answer = AnswerThenRelease(b"{}", body)
    del body
    gc.collect()
    assert list(answer) == [b"{}"]
    assert alive() is not None, "released before the answer was sent"
    answer.close()
    gc.collect()
    assert alive() is None, "still held after the answer was sent"
    socket_body.configure(True)
