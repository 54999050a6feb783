"""HTTP only: the Flask app (``create_app(config)``), the WSGI verb dispatch, body reading, ops routes, ``/why``.
May import service, record, decide, session, wire, config, process, trace, logs and metrics;
never verb_names, fixture_runner, replay or commands (a verb is served by what its table entry says).

Verb routes (``POST /predicate`` ...) are answered by :class:`dispatch.VerbDispatch`, a thin WSGI
layer in front of Flask that reads the body and answers as ``decide.handlers.respond`` does; the ops routes
(``ops``) and ``GET /why`` (``why``) are Flask blueprints; every error is a JSON body ``{"error": ...}``.
With ``ops_bind`` set, ``ports.PortSplit`` answers the verbs on ``bind`` alone and the rest on
``ops_bind`` alone.
Long-lived state lives in ``app.extensions["policy_extender"]`` (:class:`policy_extender.service.Service`,
read through ``current.service()``).
"""

from __future__ import annotations

import logging
from typing import Callable

from flask import Flask, jsonify
from werkzeug.exceptions import HTTPException

from policy_extender import logs, metrics
from policy_extender.config import Config
from policy_extender.decide.session_gaps import SessionGaps, late_open_watch
from policy_extender.decide.table import SESSION_OPENS
from policy_extender.decide.verbs import EVERY_VERB
from policy_extender.logs import RequestIdMiddleware
from policy_extender.service import RequestRecord, Service
from policy_extender.web import current, socket_body
from policy_extender.web.dispatch import VerbDispatch
from policy_extender.web.ops import ops
from policy_extender.web.ports import PortSplit
from policy_extender.web.why import why

log = logging.getLogger("policy_extender.web")


def create_app(config: Config | None = None, *, sessions=None, start: bool = True,
               runtime_dir: str | None = None) -> Flask:
    """A Flask app serving ``config`` (defaults when None); ``sessions`` overrides the store;
    ``runtime_dir`` is the instance's private directory (``serve`` passes it; see instance.py)."""

    app = Flask("policy_extender")
    svc = Service(config or Config(), sessions=sessions, runtime_dir=runtime_dir)
    socket_body.configure(svc.config.huge_pages, svc.config.keep_body_maps, metrics.count_body_map)
    svc.session_gaps = SessionGaps()
    current.keep(app, svc)
    app.register_blueprint(ops)
    app.register_blueprint(why)
    app.register_error_handler(HTTPException, _http_error)
    # verb calls bind their own request id; the dispatch counts each in the metrics itself
    app.wsgi_app = VerbDispatch(svc, RequestIdMiddleware(app.wsgi_app), notable=_notable_call(svc.config))  # type: ignore[method-assign]  # Flask's way to wrap its WSGI app
    if svc.config.ops_bind:  # the verbs on bind alone, the rest on ops_bind alone (web/ports.py)
        app.wsgi_app = PortSplit(app.wsgi_app, svc.routes, svc.config.bind, svc.config.ops_bind)  # type: ignore[method-assign]  # Flask documents wrapping wsgi_app so
    if start:
        svc.start()
    return app


def _http_error(exc: HTTPException):
    response = jsonify(error=f"{exc.code} {exc.name}: {exc.description}")
    response.status_code = exc.code or 500
    for key, value in exc.get_headers():
        if key.lower() == "allow":
            response.headers[key] = value
    return response


def _notable_call(config: Config) -> Callable[[RequestRecord], None]:
    """What the dispatch calls for a verb call that is not a plain 200 (every call while the
    request log is at DEBUG): its log line, and the late-open watch of an onSessionOpen."""
    late_open = late_open_watch(config)

    def notable(record: RequestRecord) -> None:
        if EVERY_VERB[record.verb].session == SESSION_OPENS:
            late_open(record)  # a 200, or a 409 superseded, slower than Volcano waits
        if record.status == 200:
            if logs.request_log.isEnabledFor(logging.DEBUG):
                logs.log_request(record.verb, None, None, record.decision or "-", record.rule or None,
                                 record.seconds)
        else:
            _log_line(record)
    return notable


def _log_line(record: RequestRecord) -> None:
    """The line of a call not answered 200: WARNING for refusals, ERROR for failures."""
    if record.decision == "no_session":  # require_session refused it: one WARNING per cycle (session_gaps)
        log.debug("%s %d %.1fms %s", record.verb, record.status, record.seconds * 1000, record.error)
    elif record.status >= 500:
        logs.log_error(f"{record.verb} answered {record.status}: {record.error}", verb=record.verb,
                       status=record.status, body_bytes=record.body_bytes)
    else:
        log.warning("%s %d %.1fms %dB %s", record.verb, record.status, record.seconds * 1000,
                    record.body_bytes, record.error)
