"""A WSGI app for the socket-body tests: reads each body with ``socket_body.read_from_socket``
and answers whether that fast path applied, with the body's length and SHA-256."""

from __future__ import annotations

import hashlib
import json

from policy_extender.web.socket_body import read_from_socket


def app(environ: dict, start_response):
    length = int(environ.get("CONTENT_LENGTH") or 0)
    feeds: list = []
    consumer = _consumer(feeds) if environ.get("PATH_INFO") == "/consume" else None
    body = read_from_socket(environ, length, None, consumer)
    fast = body is not None
    if body is None:
        body = environ["wsgi.input"].read(length) if length else b""
    answer = json.dumps({"fast": fast, "length": len(body), "sha256": hashlib.sha256(body).hexdigest(),
                         "type": type(body).__name__, "feeds": feeds}).encode()
    start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(answer)))])
    return [answer]


def _consumer(feeds: list):
    """Records each feed: the count arrived, and whether the bytes before it are those the
    test sent (a body of ``i % 251`` bytes), checked at that moment."""

    def start(buffer):
        def feed(received: int) -> bool:
            expected = bytes(i % 251 for i in range(max(0, received - 4096), received))
            feeds.append([received, bytes(buffer[max(0, received - 4096):received]) == expected])
            return False
        return feed

    return start
