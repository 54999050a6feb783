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
from typing import Any, Callable, Iterable

from policy_extender import metrics, process, trace
from policy_extender.decide import names
from policy_extender.decide.names import ON_SESSION_OPEN
from policy_extender.decide.handlers import HANDLERS, failed
from policy_extender.decide.reply import Reply, VerbError, error_reply
from policy_extender.logs import (NO_REQUEST, REQUEST_ID_HEADER, current, drawn_ids, new_request_id, request_id_from,
                                  request_log)
from policy_extender.record.capture import begin as begin_capture
from policy_extender.service import RequestRecord, Service
from policy_extender.web import socket_body
from policy_extender.web.http import JSON_HEADERS, STATUS_LINES, check_content_type, read_body, status_line
from policy_extender.wire import arriving, open_stream, prioritize_stream

WsgiApp = Callable[[dict, Callable], Iterable[bytes]]
_JSON_CONTENT = JSON_HEADERS[0]
_clock, _MMAP = time.perf_counter, mmap.mmap
_METRICS, _METRIC_CALLS_AT_MOST = metrics.PENDING, metrics.CALLS_AT_MOST
log = logging.getLogger("policy_extender.web")
_DEBUG = logging.DEBUG
#: the request log's level -> enabled, as ``Logger.isEnabledFor`` caches it (a dict logging
#: empties in place whenever a level changes); an empty dict of our own where there is none
_REQUEST_LOG_LEVELS: Any = getattr(request_log, "_cache", None)
if not isinstance(_REQUEST_LOG_LEVELS, dict):
    _REQUEST_LOG_LEVELS = {}


class VerbDispatch:
    """WSGI middleware: verb paths -> the verb's handler (as :func:`decide.handlers.respond`), anything
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
        #: path -> what serving it takes, looked up once per call: (kind, handler, body limit,
        #: streamed, body timeout); the config and the handlers are fixed for a process's life
        self.serving = {path: (kind, HANDLERS[kind], service.body_limits[kind], kind in _STREAMED,
                               service.config.body_timeout) for path, kind in service.routes.items()}
        self.tracer = trace.from_env()  # None unless POLICY_EXTENDER_TRACE (policy_extender/trace.py)
        #: neither tracing nor recording (--record), both fixed for the process's life: then a
        #: call checks this one attribute instead of four (0.5-0.6 us a call in context, A/B)
        self.plain = self.tracer is None and service.recorder is None

    def __call__(self, environ: dict, start_response: Callable) -> Iterable[bytes]:
        serving = self.serving.get(environ.get("PATH_INFO", ""))
        if serving is None:
            return self.fallback(environ, start_response)
        kind, handler, limit, streamed, timeout = serving
        # the request id, bound here rather than by a middleware around the whole app: one layer
        # and one start_response closure less on every verb call (the fallback has its own)
        given = environ.get("HTTP_X_REQUEST_ID")
        if given:
            request_id = request_id_from(given)
        else:
            try:
                request_id = drawn_ids.pop()  # new_request_id(), a call less
            except IndexError:
                request_id = new_request_id()
        current.request_id = request_id  # logs.bind_request_id, written out (put back below)
        service = self.service
        try:
            started = _clock()
            plain = self.plain
            if plain:
                marks = capture = None
            else:
                marks = self.tracer.begin() if self.tracer is not None else None
                # begin_capture, when the service records (--record)
                capture = begin_capture(service, kind, environ) if service.recorder is not None else None
            # the reply and the body it answered (None when the body was not read whole), written
            # out here rather than in helpers: a Python call costs about 330 instructions
            if environ.get("REQUEST_METHOD") != "POST":
                reply, body = _not_a_post(kind, environ), b""
            else:
                # the body, under the verb's limit (VerbError: 415, 413, 408, 400); read here
                # rather than in a helper for every verb but the two streamed ones
                try:
                    content_type = environ.get("CONTENT_TYPE")
                    if content_type and content_type != "application/json":  # Volcano's, else the check
                        check_content_type(environ)
                    if streamed:
                        body = read_streamed(service, kind, environ)
                    else:
                        body = read_body(environ, limit, timeout)
                        if not plain and trace.mark is not trace.OFF:  # a call less while tracing is off
                            trace.mark("received")
                except VerbError as exc:  # logged once, with the other non-200s, by the request callback
                    reply, body = error_reply(exc.status, exc.message, exc.headers), None
                else:
                    try:  # decide.handlers.respond, written out
                        reply = handler(service, body)
                    except Exception as exc:
                        reply = failed(kind, exc)
                    finally:
                        if streamed:  # only these hand a stream over (read_streamed)
                            arriving.drop()  # a stream no handler took must not keep the body
            if not plain:
                if marks is not None:
                    marks.append(("replied", _clock()))
                if capture is not None:
                    capture.finish(reply.status, reply.body, body)
            size = len(body) if body is not None else _size(environ)
            status = reply.status
            if status == 200 and not reply.headers:  # nearly every call: one list, nothing unpacked
                start_response("200 OK", [_JSON_CONTENT, ("Content-Length", str(len(reply.body))),
                                          (REQUEST_ID_HEADER, request_id)])
            else:
                start_response(STATUS_LINES.get(status) or status_line(status), [
                    *JSON_HEADERS, ("Content-Length", str(len(reply.body))), *reply.headers,
                    (REQUEST_ID_HEADER, request_id)])
            seconds = _clock() - started
            # every verb call counted from its values (metrics.note_request, written out: a
            # Python call less); the RequestRecord is built only for a callback
            pending = _METRICS
            if pending.flusher_pid is not process.pid:  # another int object only after a fork
                metrics.start_flusher()
            calls = pending.calls
            if status == 200:
                calls.extend((kind, status, seconds, size, reply.rule, reply.decision))  # atomic
            else:  # the decision of a refusal or a failure is not counted
                calls.extend((kind, status, seconds, size, "", ""))
            if len(calls) >= _METRIC_CALLS_AT_MOST:
                metrics.flush()
            if self.notable is None:
                notable = False
            elif status != 200 or kind == ON_SESSION_OPEN:
                notable = True
            else:  # a 200 is logged at DEBUG only: request_log.isEnabledFor(DEBUG), from logging's
                # own per-level cache (a Python call less), asked again once logging cleared it
                notable = _REQUEST_LOG_LEVELS.get(_DEBUG)
                if notable is None:
                    notable = request_log.isEnabledFor(_DEBUG)
            if notable or service.finished:
                record = RequestRecord(kind, status, reply.decision, reply.rule, seconds, size,
                                       reply.body.decode() if status != 200 else "")
                if notable:
                    try:
                        self.notable(record)  # type: ignore[misc]  # notable: not None
                    except Exception:  # a log line that cannot be written must not fail the call
                        log.exception("the log line of a %s call failed", kind)
                if service.finished:
                    service.report(record)
            if marks is not None:
                self.tracer.end(kind, started, marks)  # type: ignore[union-attr]  # marks: a tracer's
        finally:
            # put back: a verb call is never nested in another (the server calls the app once
            # per request on its thread), so what was there is NO_REQUEST; not read, as
            # logs.bind_request_id would
            current.request_id = NO_REQUEST
        if type(body) is _MMAP:
            return AnswerThenRelease(reply.body, body)
        return [reply.body]


def _not_a_post(kind: str, environ: dict) -> Reply:
    return error_reply(405, f"{environ.get('REQUEST_METHOD')} is not allowed on {environ.get('PATH_INFO')}: "
                       f"Volcano's {kind} is a POST", (("Allow", "POST"),))


def read_streamed(service: Service, kind: str, environ: dict) -> bytes:
    """The body of an onSessionOpen or prioritize call (the two that grow with the cluster),
    decoded while it arrives (``wire.open_stream``, ``wire.prioritize_stream``), pruned to the
    current policy set's reads; the verb's decoder takes the result (``wire.arriving.hand_over``
    / ``take``). Raises VerbError (413, 408, 400) as ``read_body`` does."""
    limit, timeout = service.body_limits[kind], service.config.body_timeout
    stream_type = _STREAMED[kind]
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


#: the verbs whose bodies are decoded while they arrive, and how
_STREAMED = {names.ON_SESSION_OPEN: open_stream.OpenStream, names.PRIORITIZE: prioritize_stream.PrioritizeStream}


class AnswerThenRelease:
    """The answer, holding the request's mapped body (``web.socket_body``: 32 MiB and more)
    until the server has sent it (gunicorn calls ``close`` after writing the answer), then
    giving it back to be kept for the next body (``socket_body.give_back``) or unmapped
    (10-20 ms for 268 MB, which the client then does not wait for)."""

    __slots__ = ("_answer", "_body")
    _body: mmap.mmap | None

    def __init__(self, answer: bytes, body: mmap.mmap) -> None:
        self._answer, self._body = answer, body

    def __iter__(self):
        yield self._answer

    def close(self) -> None:
        body, self._body = self._body, None
        if body is not None:
            socket_body.give_back(body)  # kept only if nothing else refers to it


def _size(environ: dict) -> int:
    text = environ.get("CONTENT_LENGTH") or "0"
    return int(text) if text.isdigit() else 0
