"""VerbDispatch: a thin WSGI layer that answers Volcano's verb routes before Flask sees them.

A verb call is a POST to one fixed path, so a dict lookup on ``PATH_INFO`` replaces Flask's
routing, request object and response object (about a third of a predicate call's time in a
profile: the body never passes through ``werkzeug``). Everything else (ops routes, unknown paths,
errors) falls through to the Flask app, which is also what ``app.test_client()`` calls, so tests
drive exactly the production path.
"""

from __future__ import annotations

import logging
import mmap
import time
from typing import Callable, Iterable

from policy_extender.replay.capture import begin as begin_capture
from policy_extender.web import trace
from policy_extender.web.http import JSON_HEADERS, HttpError, Reply, error_reply, status_line
from policy_extender.web.service import RequestRecord, Service
from policy_extender.web.verbs import answer, read_request

log = logging.getLogger("policy_extender.web")

WsgiApp = Callable[[dict, Callable], Iterable[bytes]]


class VerbDispatch:
    """WSGI middleware: verb paths -> :func:`verbs.answer`, anything else -> ``fallback``."""

    def __init__(self, service: Service, fallback: WsgiApp) -> None:
        self.service = service
        self.fallback = fallback
        self.routes = service.routes
        self.tracer = trace.from_env()  # None unless POLICY_EXTENDER_TRACE (web/trace.py)

    def __call__(self, environ: dict, start_response: Callable) -> Iterable[bytes]:
        kind = self.routes.get(environ.get("PATH_INFO", ""))
        if kind is None:
            return self.fallback(environ, start_response)
        started = time.perf_counter()
        marks = self.tracer.begin() if self.tracer is not None else None
        capture = begin_capture(self.service, kind, environ)  # None unless --record
        reply, body = self._reply(kind, environ)
        if marks is not None:
            marks.append(("replied", time.perf_counter()))
        size = len(body) if body is not None else _size(environ)
        if capture is not None:
            capture.finish(reply.status, reply.body, body)
        headers = [*JSON_HEADERS, ("Content-Length", str(len(reply.body))), *reply.headers]
        start_response(status_line(reply.status), headers)
        self.service.report(RequestRecord(kind, reply.status, reply.decision, reply.rule,
                                          time.perf_counter() - started, size,
                                          reply.body.decode() if reply.status != 200 else ""))
        if marks is not None:
            self.tracer.end(kind, started, marks)
        if type(body) is mmap.mmap:
            return AnswerThenRelease(reply.body, body)
        return [reply.body]

    def _reply(self, kind: str, environ: dict) -> tuple[Reply, bytes | None]:
        """The reply and the body it answered (None when the body was not read whole)."""
        if environ.get("REQUEST_METHOD") != "POST":
            return error_reply(405, f"{environ.get('REQUEST_METHOD')} is not allowed on "
                               f"{environ.get('PATH_INFO')}: Volcano's {kind} is a POST",
                               (("Allow", "POST"),)), b""
        body = None
        try:
            body = read_request(self.service, kind, environ)
            return answer(self.service, kind, body), body
        except HttpError as exc:  # logged once, with the other non-200s, by the request callback
            return error_reply(exc.status, exc.message, exc.headers), body
        except Exception as exc:  # a bug or an EvalError: a 500, so extender.ignorable decides
            log.exception("%s failed", kind)
            return error_reply(500, f"{kind} failed: {type(exc).__name__}: {exc}"), body


class AnswerThenRelease:
    """The answer, holding the request's mapped body (``web.socket_body``: 32 MiB and more)
    until the server has sent it: unmapping a 268 MB body takes 10-20 ms, which the client
    then does not wait for (gunicorn calls ``close`` after writing the answer)."""

    __slots__ = ("_answer", "_body")

    def __init__(self, answer: bytes, body: mmap.mmap) -> None:
        self._answer, self._body = answer, body

    def __iter__(self):
        yield self._answer

    def close(self) -> None:
        self._body = None


def _size(environ: dict) -> int:
    text = environ.get("CONTENT_LENGTH") or "0"
    return int(text) if text.isdigit() else 0
