"""When the worker's event loop hands a request to a thread (``web/worker.py``, ``judge``): only
once the thread will not wait for the client, whatever the body's size."""

from __future__ import annotations

import pytest

from policy_extender.web.worker import (BODY, CONTINUE, HEADERS_AT_MOST, REFUSE, WAIT, WHOLE,
                                        WHOLE_BODY_BYTES, judge)

MIB = WHOLE_BODY_BYTES
LIMITS = {"/predicate": 1000, "/prioritize": 4 * MIB, "/onSessionOpen": 10 * MIB}


def post(path: str, body: bytes, *headers: str, length: int | None = None) -> bytearray:
    lines = [f"POST {path} HTTP/1.1", "Host: x", *headers]
    if length is not None:
        lines.append(f"Content-Length: {length}")
    return bytearray(("\r\n".join(lines) + "\r\n\r\n").encode() + body)


@pytest.mark.parametrize("data,verdict", [
    (bytearray(b"POST /predicate HTTP/1.1\r\nHost: x\r\nContent-Len"), WAIT),  # headers not all there
    (post("/predicate", b"{}", length=2), WHOLE),
    (post("/predicate", b"{", length=2), WAIT),
    (post("/predicate?x=1", b"{}", length=2), WHOLE),
    (post("/predicate", b"{}", length=2) + b"POST /pred", WHOLE),  # the next request pipelined behind
    (bytearray(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"), WHOLE),  # no body
    (post("/predicate", b"", length=5000), WHOLE),  # over the verb's limit: a 413 without the body
    (post("/onSessionOpen", b"{", length=11 * MIB), WHOLE),
    (post("/onSessionOpen", b"{", length=9 * MIB), BODY),  # under it: received apart from the headers
    (post("/onSessionOpen", b" " * (9 * MIB), length=9 * MIB), WHOLE),  # then handed over whole
    (post("/prioritize", b" " * (MIB - 1), length=MIB), WAIT),  # up to a MiB: received whole
    (post("/prioritize", b" " * MIB, length=MIB), WHOLE),
    (post("/prioritize", b" " * (64 << 10), length=MIB + 1), BODY),  # no thread before the last byte
    (bytearray(b"GET / HTTP/1.1\r\n" + b"X: y\r\n" * 1000), WAIT),
    (bytearray(b"GET / HTTP/1.1\r\n" + b"X: " + b"y" * HEADERS_AT_MOST), WHOLE),  # gunicorn's 400
    (post("/predicate", b"", "Content-Length: 2", length=2), WHOLE),  # two lengths: gunicorn's 400
    (post("/predicate", b"", length=None) + b"", WHOLE),
    (bytearray(b"POST /predicate HTTP/1.1\r\nContent-Length: 2x\r\n\r\n"), WHOLE),  # gunicorn's 400
    (post("/predicate", b"", "Expect: 100-continue", length=2), CONTINUE),  # sent by the event loop
    (post("/predicate", b"1\r\n{\r\n", "Transfer-Encoding: chunked"), WAIT),
    (post("/predicate", b"1\r\n{\r\n1\r\n}\r\n0\r\n\r\n", "Transfer-Encoding: chunked"), WHOLE),
    (post("/predicate", b"1\r\n{\r\n0\r\nX-Trailer: 1\r\n", "Transfer-Encoding: chunked"), WAIT),
    (post("/predicate", b"1\r\n{\r\n0\r\nX-Trailer: 1\r\n\r\n", "Transfer-Encoding: chunked"), WHOLE),
    (post("/predicate", b"zz\r\n", "Transfer-Encoding: chunked"), WHOLE),  # bad framing: the parser's 400
    (post("/predicate", b"100000\r\n" + b" " * MIB, "Transfer-Encoding: chunked"), REFUSE),  # a long one: 413
    (post("/healthz", b"", length=MIB + 1), REFUSE),  # no verb: no large body
    (post("/healthz", b"{}", length=2), WHOLE),  # a small one: the app answers
    (post("/onSessionOpen", b"", length=9 * MIB), BODY),
])
def test_judge(data, verdict):
    assert judge(data, LIMITS)[0] == verdict


def test_a_body_over_body_memory_is_refused_with_the_option_named():
    verdict, (status, reason) = judge(post("/onSessionOpen", b"", length=9 * MIB), LIMITS, body_memory=8 * MIB)
    assert (verdict, status) == (REFUSE, 413)
    assert "body_memory" in reason and str(9 * MIB) in reason
