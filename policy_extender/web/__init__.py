"""HTTP only: the Flask app (``create_app(config)``), the WSGI verb dispatch, body reading, ops routes.
May import everything below it (service, decide, record, ...); never fixture_runner, replay or commands.

Verb routes (``POST /predicate`` ...) are answered by :class:`dispatch.VerbDispatch`, a thin WSGI
layer in front of Flask that reads the body and calls ``decide.handlers.respond``; the ops routes
are a Flask blueprint; every error is a JSON body ``{"error": ...}``. Long-lived state lives in
``app.extensions["policy_extender"]`` (:class:`policy_extender.service.Service`).
"""

from __future__ import annotations

import logging

from flask import Flask, jsonify
from werkzeug.exceptions import HTTPException

from policy_extender import logs, metrics
from policy_extender.config import Config
from policy_extender.decide.session_gaps import SessionGaps, late_open_watch
from policy_extender.logs import RequestIdMiddleware
from policy_extender.service import RequestRecord, Service
from policy_extender.web import socket_body
from policy_extender.web.dispatch import VerbDispatch
from policy_extender.web.ops import ops

log = logging.getLogger("policy_extender.web")


def create_app(config: Config | None = None, *, sessions=None, start: bool = True,
               runtime_dir: str | None = None) -> Flask:
    """A Flask app serving ``config`` (defaults when None); ``sessions`` overrides the store;
    ``runtime_dir`` is the instance's private directory (``serve`` passes it; see instance.py)."""

    app = Flask("policy_extender")
    svc = Service(config or Config(), sessions=sessions, runtime_dir=runtime_dir)
    socket_body.configure(svc.config.huge_pages)
    svc.session_gaps = SessionGaps()
    app.extensions["policy_extender"] = svc
    app.register_blueprint(ops)
    app.register_error_handler(HTTPException, _http_error)
    svc.on_request_finished(_observe)
    svc.on_request_finished(_log_line)
    svc.on_request_finished(late_open_watch(svc.config))
    app.wsgi_app = VerbDispatch(svc, RequestIdMiddleware(app.wsgi_app))  # verb calls bind their own id
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


def _observe(record: RequestRecord) -> None:
    metrics.note_call(record)  # an answer's decision counted too; the record kept as it is


def _log_line(record: RequestRecord) -> None:
    """One line per verb call: DEBUG for answers, WARNING for refusals, ERROR for failures."""
    if record.status == 200:  # the common case first, and nothing more when DEBUG is off
        if logs.request_log.isEnabledFor(logging.DEBUG):
            logs.log_request(record.verb, None, None, record.decision or "-", record.rule or None,
                             record.seconds)
    elif record.decision == "no_session":  # require_session refused it: one WARNING per cycle (session_gaps)
        log.debug("%s %d %.1fms %s", record.verb, record.status, record.seconds * 1000, record.error)
    elif record.status >= 500:
        logs.log_error(f"{record.verb} answered {record.status}: {record.error}", verb=record.verb,
                       status=record.status, body_bytes=record.body_bytes)
    else:
        log.warning("%s %d %.1fms %dB %s", record.verb, record.status, record.seconds * 1000,
                    record.body_bytes, record.error)
