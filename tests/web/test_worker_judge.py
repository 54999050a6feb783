"""When the worker's event loop hands a request to a thread (``web/worker.py``, ``judge``): only
once the thread will not wait for the client, except for a large body (its first 64 KiB arrived)."""

from __future__ import annotations

import pytest

from policy_extender.web.worker import (HEADERS_AT_MOST, LARGE, STREAM_AFTER_BYTES, WAIT, WHOLE,
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
    (post("/onSessionOpen", b"{", length=9 * MIB), WAIT),  # under it: its start is waited for
    (post("/onSessionOpen", b" " * STREAM_AFTER_BYTES, length=9 * MIB), LARGE),  # then streamed by a thread
    (post("/prioritize", b" " * (MIB - 1), length=MIB), WAIT),  # up to a MiB: received whole
    (post("/prioritize", b" " * MIB, length=MIB), WHOLE),
    (post("/prioritize", b" " * STREAM_AFTER_BYTES, length=MIB + 1), LARGE),
    (bytearray(b"GET / HTTP/1.1\r\n" + b"X: y\r\n" * 1000), WAIT),
    (bytearray(b"GET / HTTP/1.1\r\n" + b"X: " + b"y" * HEADERS_AT_MOST), WHOLE),  # gunicorn's 400
    (post("/predicate", b"", "Content-Length: 2", length=2), WHOLE),  # two lengths: gunicorn's 400
    (post("/predicate", b"", length=None) + b"", WHOLE),
    (bytearray(b"POST /predicate HTTP/1.1\r\nContent-Length: 2x\r\n\r\n"), WHOLE),  # gunicorn's 400
    (post("/predicate", b"", "Expect: 100-continue", length=2), LARGE),  # the body after 100 Continue
    (post("/predicate", b"1\r\n{\r\n", "Transfer-Encoding: chunked"), WAIT),
    (post("/predicate", b"1\r\n{\r\n1\r\n}\r\n0\r\n\r\n", "Transfer-Encoding: chunked"), WHOLE),
    (post("/predicate", b"1\r\n{\r\n0\r\nX-Trailer: 1\r\n", "Transfer-Encoding: chunked"), WAIT),
    (post("/predicate", b"1\r\n{\r\n0\r\nX-Trailer: 1\r\n\r\n", "Transfer-Encoding: chunked"), WHOLE),
    (post("/predicate", b"zz\r\n", "Transfer-Encoding: chunked"), WHOLE),  # bad framing: the parser's 400
    (post("/predicate", b"100000\r\n" + b" " * MIB, "Transfer-Encoding: chunked"), LARGE),  # a long one
])
def test_judge(data, verdict):
    assert judge(data, LIMITS) == verdict
