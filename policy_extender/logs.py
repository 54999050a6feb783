"""Logging: one format (text or JSON lines) for the service and for gunicorn, with request ids.

* :func:`configure` sets up the root logger (``policy-extender serve`` without gunicorn, tests);
  :func:`gunicorn_logconfig` is the same thing as a ``logconfig_dict`` for gunicorn, so its
  ``gunicorn.error`` and ``gunicorn.access`` lines come out in the same format.
* The request id of the request being served lives in a thread-local attribute
  (``current.request_id``; a request runs on one thread under gthread workers).
  :class:`RequestIdFilter` copies it onto every record as ``request_id``;
  :class:`RequestIdMiddleware` (WSGI) binds it for each request, from ``X-Request-Id`` when the
  caller sent a sane one, else a new one, and echoes it in the response; the verb dispatch
  (``web/dispatch.py``) does the same for verb calls itself, one layer less on the hot path.
* :func:`log_request` writes one DEBUG line per Volcano call; :func:`log_error` writes errors at
  ERROR, always with the request id.
"""

from __future__ import annotations

import json
import logging
import os
import re
import sys
import threading
import time
from typing import Any, Callable, Iterable

REQUEST_ID_HEADER = "X-Request-Id"
NO_REQUEST = "-"
FORMATS = ("text", "json")
#: the name of the root handler :func:`configure` adds (and replaces when called again)
HANDLER_NAME = "policy_extender"


class _Current(threading.local):
    """This thread's request id (``NO_REQUEST`` outside a request), which every log line
    carries: a thread-local attribute, set and put back around each call. A ContextVar did the
    same with a new context mapping and a token per ``set`` and another mapping per ``reset``
    (0.45 us of a predicate call in context, A/B). A request runs on one thread from start to
    end (gunicorn's gthread worker), and a thread started meanwhile starts at ``NO_REQUEST``,
    as it did with the ContextVar."""

    request_id: str = NO_REQUEST


#: ``current.request_id``: the request id of the call this thread serves
current = _Current()

_SANE_REQUEST_ID = re.compile(r"[A-Za-z0-9._:/+=@-]{1,128}")

#: Attributes every LogRecord has; anything else on a record came from ``extra=`` and is a field.
_RECORD_ATTRS = frozenset(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {
    "message", "asctime", "request_id", "taskName"}

request_log = logging.getLogger("policy_extender.request")
error_log = logging.getLogger("policy_extender.error")


# ---------------------------------------------------------------------------------------------
# request ids


#: random version-4 UUIDs drawn at a time: one ``os.urandom`` call and a few C passes per batch
ID_BATCH = 1024
#: byte -> the byte with a UUID's version (4) or variant (RFC 4122) bits, for ``bytes.translate``
_VERSION_4 = bytes((b & 0x0F) | 0x40 for b in range(256))
_VARIANT_RFC4122 = bytes((b & 0x3F) | 0x80 for b in range(256))
#: ids drawn and not yet given out (``drawn_ids.pop()`` is one); emptied in place in a forked
#: child (``_forget_ids``)
drawn_ids: list[str] = []


def new_request_id() -> str:
    """A random (version 4) UUID as 32 hex digits, as ``uuid.uuid4().hex`` gives, on every call
    that brings no id of its own. Ids are drawn ``ID_BATCH`` at a time (:func:`_draw_ids`) and
    handed out with one ``list.pop``, which is atomic, so threads never get the same one: about
    0.4k instructions a call against 3.2k for one ``getrandbits(128)`` turned into hex per call
    (callgrind). A forked child empties the list before it runs (``os.register_at_fork``), so
    gunicorn's workers never hand out their master's ids."""
    try:
        return drawn_ids.pop()
    except IndexError:
        return _draw_ids()


def _draw_ids() -> str:
    """Refill the batch (``os.urandom``: fresh in every process, reseeded by nobody) and
    return one id of it. Two threads that find the list empty at once both add a batch."""
    raw = bytearray(os.urandom(16 * ID_BATCH))
    raw[6::16] = raw[6::16].translate(_VERSION_4)          # time_hi_and_version: 0100xxxx
    raw[8::16] = raw[8::16].translate(_VARIANT_RFC4122)    # clock_seq_hi_and_reserved: 10xxxxxx
    batch = raw.hex(" ", 16).split(" ")  # 32 hex digits per id, split in C
    mine = batch.pop()
    drawn_ids.extend(batch)
    return mine


def _forget_ids() -> None:
    drawn_ids.clear()


os.register_at_fork(after_in_child=_forget_ids)


def request_id_from(header_value: str | None) -> str:
    """The caller's id when it is a sane token (no spaces, quotes, newlines; <= 128), else a new one."""
    if header_value and _SANE_REQUEST_ID.fullmatch(header_value):
        return header_value
    return new_request_id()


def bind_request_id(request_id: str) -> str:
    """Make ``request_id`` this thread's; pass what it returns to :func:`unbind_request_id`."""
    previous = current.request_id
    current.request_id = request_id
    return previous


def unbind_request_id(previous: str) -> None:
    current.request_id = previous


def current_request_id() -> str:
    return current.request_id


class RequestIdFilter(logging.Filter):
    """Adds ``record.request_id`` (the current request's, or ``-``) unless the caller gave one."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not hasattr(record, "request_id"):
            record.request_id = current.request_id
        return True


class RequestIdMiddleware:
    """WSGI middleware: binds a request id around every call and echoes it in ``X-Request-Id``.

    It wraps the Flask app (ops routes, unknown paths); verb calls bind theirs in the verb
    dispatch, so every line logged while any request is served, including the request-finished
    callbacks, carries its id. The id is unbound when the app returns its body iterable (the
    service's bodies are single byte strings, so nothing is logged while iterating).
    """

    def __init__(self, app: Callable[[dict, Callable], Iterable[bytes]]) -> None:
        self.app = app

    def __call__(self, environ: dict, start_response: Callable) -> Iterable[bytes]:
        request_id = request_id_from(environ.get("HTTP_X_REQUEST_ID"))
        token = bind_request_id(request_id)

        def start_with_id(status: str, headers: list, exc_info: Any = None) -> Any:
            return start_response(status, [*headers, (REQUEST_ID_HEADER, request_id)], exc_info)

        try:
            return self.app(environ, start_with_id)
        finally:
            unbind_request_id(token)


# ---------------------------------------------------------------------------------------------
# formatters


def extra_fields(record: logging.LogRecord) -> dict[str, Any]:
    """The fields a caller attached with ``extra=``."""
    return {k: v for k, v in vars(record).items() if k not in _RECORD_ATTRS and not k.startswith("_")}


def utc_timestamp(created: float) -> str:
    seconds = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(created))
    return f"{seconds}.{int(created % 1 * 1000):03d}Z"


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ts, level, logger, msg, request_id, the extra fields, exc."""

    def format(self, record: logging.LogRecord) -> str:
        entry = {"ts": utc_timestamp(record.created), "level": record.levelname,
                 "logger": record.name, "msg": record.getMessage(),
                 "request_id": getattr(record, "request_id", NO_REQUEST)}
        entry.update(extra_fields(record))
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        if record.stack_info:
            entry["stack"] = self.formatStack(record.stack_info)
        return json.dumps(entry, default=str, ensure_ascii=False)


class TextFormatter(logging.Formatter):
    """``2025-01-21T10:00:00.123Z INFO policy_extender.web [req-id] message key=value ...``"""

    def format(self, record: logging.LogRecord) -> str:
        fields = " ".join(f"{k}={_text_value(v)}" for k, v in extra_fields(record).items())
        line = (f"{utc_timestamp(record.created)} {record.levelname} {record.name} "
                f"[{getattr(record, 'request_id', NO_REQUEST)}] {record.getMessage()}")
        line = f"{line} {fields}" if fields else line
        if record.exc_info:
            line = f"{line}\n{self.formatException(record.exc_info)}"
        return line


def _text_value(value: Any) -> str:
    text = str(value)
    return json.dumps(text) if (not text or any(c in text for c in ' "=\n')) else text


def formatter_class(fmt: str) -> type[logging.Formatter]:
    if fmt not in FORMATS:
        raise ValueError(f"log format {fmt!r} is not one of {', '.join(FORMATS)}; "
                         "set log_format (POLICY_EXTENDER_LOG_FORMAT) to text or json")
    return JsonFormatter if fmt == "json" else TextFormatter


# ---------------------------------------------------------------------------------------------
# configuration


def configure(level: str | int = "info", fmt: str = "text", stream: Any = None) -> logging.Handler:
    """Send every log record (ours and libraries') to ``stream`` (stderr) in one format."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(formatter_class(fmt)())
    handler.addFilter(RequestIdFilter())
    root = logging.getLogger()
    for old in [h for h in root.handlers if h.name == HANDLER_NAME]:
        root.removeHandler(old)
    handler.name = HANDLER_NAME
    root.addHandler(handler)
    root.setLevel(_level(level))
    return handler


def gunicorn_logconfig(level: str | int = "info", fmt: str = "text") -> dict[str, Any]:
    """A ``logconfig_dict`` for gunicorn: its logs and ours through one handler and format."""
    formatter_class(fmt)  # refuse an unknown format here, where the message says how to fix it
    handler = {"class": "logging.StreamHandler", "stream": "ext://sys.stderr",
               "formatter": fmt, "filters": ["request_id"]}
    gunicorn_logger = {"level": _level_name(level), "handlers": ["stderr"], "propagate": False}
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "filters": {"request_id": {"()": RequestIdFilter}},
        "formatters": {"text": {"()": TextFormatter}, "json": {"()": JsonFormatter}},
        "handlers": {"stderr": handler},
        "root": {"level": _level_name(level), "handlers": ["stderr"]},
        "loggers": {"gunicorn.error": gunicorn_logger,
                    "gunicorn.access": {**gunicorn_logger, "level": "INFO"}},
    }


def _level(level: str | int) -> int:
    if isinstance(level, int):
        return level
    number = logging.getLevelName(level.upper())
    if not isinstance(number, int):
        raise ValueError(f"log level {level!r} is not one of debug, info, warning, error")
    return number


def _level_name(level: str | int) -> str:
    return logging.getLevelName(_level(level))


# ---------------------------------------------------------------------------------------------
# what the service calls


def log_request(verb: str, task: str | None, node: str | None, decision: Any, rule: str | None,
                seconds: float, request_id: str | None = None) -> None:
    """One DEBUG line per Volcano call (nothing is formatted when DEBUG is off)."""
    if not request_log.isEnabledFor(logging.DEBUG):
        return
    request_log.debug("%s %s", verb, decision, extra={
        "verb": verb, "task": task, "node": node, "decision": decision, "rule": rule,
        "ms": round(seconds * 1000, 3), "request_id": request_id or current_request_id()})


def log_error(message: str, *, verb: str | None = None, request_id: str | None = None,
              exc_info: Any = None, **fields: Any) -> None:
    """An error, always at ERROR and with the request id; ``exc_info=True`` adds the traceback."""
    error_log.error(message, exc_info=exc_info, extra={
        **fields, "verb": verb, "request_id": request_id or current_request_id()})
