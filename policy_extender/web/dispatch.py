"""VerbDispatch: a thin WSGI layer that answers the schedulers' verb routes (Volcano's and
kube-scheduler's) before Flask sees them.

A verb call is a POST to one fixed path, so a dict lookup on ``PATH_INFO`` replaces Flask's
routing, request object and response object (about a third of a predicate call's time in a
profile: the body never passes through ``werkzeug``). Everything else (ops routes, unknown paths,
errors) falls through to the Flask app, which is also what ``app.test_client()`` calls, so tests
drive exactly the production path.

One verb call, in order: its request id bound (``logs.bind_request_id``), the body read under the
verb's limit, the reply (``decide.handlers.respond``), the answer started, the call counted
(``metrics.note_request``), then its log line and request-finished callbacks when something
takes them (:meth:`VerbDispatch._report`).
"""

from __future__ import annotations

import logging
import mmap
import time
from typing import Any, Callable, Iterable, Iterator, NamedTuple

from policy_extender import metrics, trace
from policy_extender.decide import session_verbs
from policy_extender.decide.handlers import respond
from policy_extender.decide.table import DECIDING, SESSION_OPENS
from policy_extender.decide.reply import Reply, VerbError, error_reply
from policy_extender.decide.verbs import EVERY_VERB
from policy_extender.logs import REQUEST_ID_HEADER, bind_request_id, request_id_from, request_log, unbind_request_id
from policy_extender.record.capture import begin as begin_capture
from policy_extender.service import RequestRecord, Service
from policy_extender.web import socket_body
from policy_extender.web.http import ARRIVAL, JSON_HEADERS, check_content_type, read_body, status_line
from policy_extender.wire import arriving

WsgiApp = Callable[[dict, Callable], Iterable[bytes]]
log = logging.getLogger("policy_extender.web")


class VerbRoute(NamedTuple):
    """What serving one verb path takes; the config is fixed for a process's life."""

    kind: str            # the verb kind (a key of ``decide.verbs.EVERY_VERB``)
    body_limit: int      # bytes (``body_limits``)
    body_timeout: float  # seconds (``body_timeout``)
    #: the wire stream that decodes it while it arrives (:func:`read_streamed`), or None
    stream: Callable[..., Any] | None
    notable: bool        # every call goes to ``notable``, not only the non-200s (``Verb.notable``)
    #: seconds the scheduler waits for the answer, counted from the request's first byte: past
    #: them evaluation stops (E513, ``lang.budget``). ``volcano_timeout`` for Volcano's deciding
    #: verbs; 0 (no deadline) for the others
    timeout: float = 0.0


class VerbDispatch:
    """WSGI middleware: verb paths -> the verb's reply (:func:`decide.handlers.respond`), anything
    else -> ``fallback``.

    A verb call gets its request id here (``logs.request_id_from``: the caller's ``X-Request-Id``
    when sane, else a new one), bound while it is served and echoed in the answer, as
    ``logs.RequestIdMiddleware`` does for the fallback."""

    def __init__(self, service: Service, fallback: WsgiApp,
                 notable: Callable[[RequestRecord], None] | None = None) -> None:
        self.service = service
        self.fallback = fallback
        #: called for a call that is not a plain 200 (any call while the request log is at DEBUG)
        self.notable = notable
        #: path -> its route, looked up once per call
        timeout = max(service.config.volcano_timeout, 0.0)
        self.routes = {path: VerbRoute(kind, service.body_limits[kind], service.config.body_timeout,
                                       EVERY_VERB[kind].stream, EVERY_VERB[kind].notable,
                                       timeout if kind in DECIDING else 0.0)
                       for path, kind in service.routes.items()}
        self.tracer = trace.from_env()  # None unless POLICY_EXTENDER_TRACE (policy_extender/trace.py)

    def __call__(self, environ: dict, start_response: Callable) -> Iterable[bytes]:
        route = self.routes.get(environ.get("PATH_INFO", ""))
        if route is None:
            return self.fallback(environ, start_response)
        request_id = request_id_from(environ.get("HTTP_X_REQUEST_ID"))
        previous = bind_request_id(request_id)
        try:
            started = time.perf_counter()
            marks = self.tracer.begin() if self.tracer is not None else None
            capture = begin_capture(self.service, route.kind, environ) if self.service.recorder is not None else None
            reply, body = self._reply(route, environ)
            if marks is not None:
                marks.append(("replied", time.perf_counter()))
            if capture is not None:
                capture.finish(reply.status, reply.body, body)
            start_response(status_line(reply.status), answer_headers(reply, request_id))
            seconds = time.perf_counter() - started
            size = len(body) if body is not None else _declared_size(environ)
            metrics.note_request(route.kind, reply.status, seconds, size, reply.rule, reply.decision)
            self._report(route, reply, _waited(route, seconds), size)
            if marks is not None and self.tracer is not None:
                self.tracer.end(route.kind, started, marks)
        finally:
            unbind_request_id(previous)
        if isinstance(body, mmap.mmap):
            return AnswerThenRelease(reply.body, body)
        return [reply.body]

    def _reply(self, route: VerbRoute, environ: dict) -> tuple[Reply, Any]:
        """The reply, and the body it answered (None when the body was not read whole)."""
        if environ.get("REQUEST_METHOD") != "POST":
            return _not_a_post(route.kind, environ), b""
        opening = EVERY_VERB[route.kind].session == SESSION_OPENS
        if opening:  # ordered by arrival: its ticket before its body (decide/session_verbs.py)
            session_verbs.note_arrival(self.service)
        try:
            arrived = getattr(ARRIVAL, "started", None) or time.monotonic()  # the worker's first byte, else now
            try:
                body = self._read(route, environ)
            except VerbError as exc:  # 415, 413, 408, 400: logged once, with the other non-200s, by _report
                return error_reply(exc.status, exc.message, exc.headers), None
            deadline = arrived + route.timeout if route.timeout else None
            try:
                return respond(self.service, route.kind, body, deadline), body
            finally:
                if route.stream is not None:  # only these hand a stream over (read_streamed)
                    arriving.drop()  # a stream no handler took must not keep the body
        finally:
            if opening:
                session_verbs.forget_arrival()

    def _read(self, route: VerbRoute, environ: dict) -> Any:
        """The body, under the verb's limit (VerbError: 415, 413, 408, 400)."""
        check_content_type(environ)
        if route.stream is not None:
            return read_streamed(self.service, route, environ)
        body = read_body(environ, route.body_limit, route.body_timeout)
        trace.mark("received")
        return body

    def _report(self, route: VerbRoute, reply: Reply, seconds: float, size: int) -> None:
        """The call's log line (``notable``: not a plain 200, a verb whose every call is notable,
        or the request log at DEBUG) and the request-finished callbacks; the RequestRecord is built
        only when one of them takes it."""
        kind = route.kind
        notable = self.notable is not None and (
            reply.status != 200 or route.notable or request_log.isEnabledFor(logging.DEBUG))
        if not notable and not self.service.finished:
            return
        record = RequestRecord(kind, reply.status, reply.decision, reply.rule, seconds, size,
                               reply.body.decode() if reply.status != 200 else "")
        if notable and self.notable is not None:
            try:
                self.notable(record)
            except Exception:  # a log line that cannot be written must not fail the call
                log.exception("the log line of a %s call failed", kind)
        if self.service.finished:
            self.service.report(record)


def answer_headers(reply: Reply, request_id: str) -> list[tuple[str, str]]:
    """The answer's headers: JSON, its length, the reply's own (``Allow``...), the request id."""
    return [*JSON_HEADERS, ("Content-Length", str(len(reply.body))), *reply.headers,
            (REQUEST_ID_HEADER, request_id)]


def _not_a_post(kind: str, environ: dict) -> Reply:
    return error_reply(405, f"{environ.get('REQUEST_METHOD')} is not allowed on {environ.get('PATH_INFO')}: "
                       f"the scheduler's {kind} verb is a POST", (("Allow", "POST"),))


def read_streamed(service: Service, route: VerbRoute, environ: dict) -> bytes:
    """The body of a call whose verb has a ``stream`` (onSessionOpen and prioritize: the two that
    grow with the cluster), decoded while it arrives (``wire.open_stream``, ``wire.prioritize_stream``), pruned to the
    current policy set's reads; the verb's decoder takes the result (``wire.arriving.hand_over``
    / ``take``). Raises VerbError (413, 408, 400) as ``read_body`` does."""
    limit, timeout = route.body_limit, route.body_timeout
    stream_type = route.stream
    assert stream_type is not None, "read_streamed is called for a verb with a stream"
    policy_set = service.policies.current
    if policy_set is None:
        body = read_body(environ, limit, timeout)
        trace.mark("received")
        return body
    streams: list = []

    def consumer(buffer: Any) -> Callable[[int], bool]:
        streams.append(stream_type(buffer, len(buffer), policy_set.reads))
        return streams[0].feed

    body = read_body(environ, limit, timeout, consumer)
    trace.mark("received")
    if streams:
        arriving.hand_over(body, policy_set, streams[0])
    return body


class AnswerThenRelease:
    """The answer, holding the request's mapped body (``web.socket_body``: 32 MiB and more)
    until the server has sent it (gunicorn calls ``close`` after writing the answer), then
    giving it back to be kept for the next body (``socket_body.give_back``) or unmapped
    (10-20 ms for 268 MB, which the client then does not wait for)."""

    __slots__ = ("_answer", "_body")
    _body: mmap.mmap | None

    def __init__(self, answer: bytes, body: mmap.mmap) -> None:
        self._answer, self._body = answer, body

    def __iter__(self) -> Iterator[bytes]:
        yield self._answer

    def close(self) -> None:
        body, self._body = self._body, None
        if body is not None:
            socket_body.give_back(body)  # kept only if nothing else refers to it


def _waited(route: VerbRoute, seconds: float) -> float:
    """What the caller waited for an onSessionOpen: from its first byte (``ARRIVAL.started``: the
    body may have arrived on the worker's event loop before this thread took it), so that the
    late-open watch (``volcano_timeout``) sees the whole of it; other calls: ``seconds``."""
    arrived = getattr(ARRIVAL, "started", None)
    if arrived is None or EVERY_VERB[route.kind].session != SESSION_OPENS:
        return seconds
    return max(seconds, time.monotonic() - arrived)


def _declared_size(environ: dict) -> int:
    """The body's size as the request declared it (a body refused before it was read whole)."""
    text = environ.get("CONTENT_LENGTH") or "0"
    return int(text) if text.isdigit() else 0
