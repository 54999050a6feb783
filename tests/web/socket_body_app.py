"""A WSGI app for the socket-body tests: reads each body with ``socket_body.read_from_socket``
and answers whether that fast path applied, with the body's length and SHA-256."""

from __future__ import annotations

import hashlib
import json

from policy_extender.web.socket_body import read_from_socket


def app(environ: dict, start_response):
    length = int(environ.get("CONTENT_LENGTH") or 0)
    body = read_from_socket(environ, length)
    fast = body is not None
    if body is None:
        body = environ["wsgi.input"].read(length) if length else b""
    answer = json.dumps({"fast": fast, "length": len(body), "sha256": hashlib.sha256(body).hexdigest(),
                         "type": type(body).__name__}).encode()
    start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(answer)))])
    return [answer]
