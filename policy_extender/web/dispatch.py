"""VerbDispatch: a thin WSGI layer that answers Volcano's verb routes before Flask sees them.

A verb call is a POST to one fixed path, so a dict lookup on ``PATH_INFO`` replaces Flask's
routing, request object and response object (about a third of a predicate call's time in a
profile: the body never passes through ``werkzeug``). Everything else (ops routes, unknown paths,
errors) falls through to the Flask app, which is also what ``app.test_client()`` calls, so tests
drive exactly the production path.
"""

from __future__ import annotations

import time
from typing import Callable, Iterable

from policy_extender.decide.handlers import respond
from policy_extender.decide.reply import Reply, VerbError, error_reply
from policy_extender.record.capture import begin as begin_capture
from policy_extender.service import RequestRecord, Service
from policy_extender.web.http import JSON_HEADERS, check_content_type, read_body, status_line

WsgiApp = Callable[[dict, Callable], Iterable[bytes]]


class VerbDispatch:
    """WSGI middleware: verb paths -> :func:`decide.handlers.respond`, anything else -> ``fallback``."""

    def __init__(self, service: Service, fallback: WsgiApp) -> None:
        self.service = service
        self.fallback = fallback
        self.routes = service.routes

    def __call__(self, environ: dict, start_response: Callable) -> Iterable[bytes]:
        kind = self.routes.get(environ.get("PATH_INFO", ""))
        if kind is None:
            return self.fallback(environ, start_response)
        started = time.perf_counter()
        capture = begin_capture(self.service, kind, environ)  # None unless --record
        reply, body = self._reply(kind, environ)
        size = len(body) if body is not None else _size(environ)
        if capture is not None:
            capture.finish(reply.status, reply.body, body)
        headers = [*JSON_HEADERS, ("Content-Length", str(len(reply.body))), *reply.headers]
        start_response(status_line(reply.status), headers)
        self.service.report(RequestRecord(kind, reply.status, reply.decision, reply.rule,
                                          time.perf_counter() - started, size,
                                          reply.body.decode() if reply.status != 200 else ""))
        return [reply.body]

    def _reply(self, kind: str, environ: dict) -> tuple[Reply, bytes | None]:
        """The reply and the body it answered (None when the body was not read whole)."""
        if environ.get("REQUEST_METHOD") != "POST":
            return error_reply(405, f"{environ.get('REQUEST_METHOD')} is not allowed on "
                               f"{environ.get('PATH_INFO')}: Volcano's {kind} is a POST",
                               (("Allow", "POST"),)), b""
        try:
            body = read_request(self.service, kind, environ)
        except VerbError as exc:  # logged once, with the other non-200s, by the request callback
            return error_reply(exc.status, exc.message, exc.headers), None
        return respond(self.service, kind, body), body


def read_request(service: Service, kind: str, environ: dict) -> bytes:
    """The body of one verb call, under the verb's limit; raises VerbError (415, 413, 408, 400)."""
    check_content_type(environ)
    return read_body(environ, service.config.body_limit_for(kind), service.config.body_timeout)


def _size(environ: dict) -> int:
    text = environ.get("CONTENT_LENGTH") or "0"
    return int(text) if text.isdigit() else 0
