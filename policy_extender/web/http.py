"""HTTP plumbing of the verb routes: errors as JSON, the request body read under a limit.

Bodies are read from ``wsgi.input`` directly (under gunicorn, from its socket into one buffer:
``socket_body.py``): a ``Content-Length`` over the verb's limit is
refused with 413 before a byte is read, and a body without a length (chunked) is refused as soon
as what was read passes the limit. Content type: Volcano sends ``application/json``; a missing
``Content-Type`` is accepted too (simple clients), any other type is 415 (``curl -d`` sends a form type).
"""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager

from policy_extender.decide.reply import VerbError
from policy_extender.web.socket_body import BodyEnded, BodyTimeout, Consumer, read_from_socket

#: ``ARRIVAL.started``: ``time.monotonic()`` when the request this thread serves began to arrive
#: (set by the worker, ``web/worker.py``): the body deadline counts from there; None elsewhere
#: (another server, tests calling the app): from when the body read starts
ARRIVAL = threading.local()

#: Bytes read at a time from a body sent without Content-Length.
CHUNK = 1024 * 1024

JSON_HEADERS = (("Content-Type", "application/json"),)

REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed",
           408: "Request Timeout", 413: "Payload Too Large", 415: "Unsupported Media Type", 500: "Internal Server Error",
           503: "Service Unavailable"}


#: status -> its HTTP status line (``status_line`` for any other)
STATUS_LINES = {status: f"{status} {reason}" for status, reason in REASONS.items()}


def status_line(status: int) -> str:
    return STATUS_LINES.get(status) or f"{status} Unknown"


def check_content_type(environ: dict) -> None:
    content_type = environ.get("CONTENT_TYPE", "")
    if content_type == "application/json" or not content_type:  # what Volcano sends, or none
        return
    media_type = content_type.split(";", 1)[0].strip().lower()
    if media_type not in ("", "application/json"):
        raise VerbError(415, f"Content-Type {content_type!r} is not supported: send the body as "
                        "application/json, as Volcano does")


def read_body(environ: dict, limit: int, timeout: float = 0.0, consumer: Consumer | None = None) -> bytes:
    """The whole request body, never more than ``limit`` bytes (413 beyond), and, when
    ``timeout`` > 0, never later than ``timeout`` seconds after the request began to arrive
    (``ARRIVAL``; 408 beyond). ``consumer``:
    see ``socket_body.read_from_socket`` (used only where the body is read from the socket)."""
    length = _content_length(environ)
    stream = environ["wsgi.input"]
    if length is None:
        with _idle_timeout(environ, timeout):
            return _read_unsized(stream, limit)
    if length > limit:
        raise _too_large(length, limit)
    deadline = (getattr(ARRIVAL, "started", None) or time.monotonic()) + timeout if timeout > 0 else None
    try:
        body = read_from_socket(environ, length, deadline, consumer)
    except BodyTimeout as late:
        raise _too_slow(late.got, length, timeout) from None
    except BodyEnded as ended:
        raise _ended(ended.got, length) from None
    if body is not None:
        return body  # type: ignore[return-value]  # a bytes-like buffer: the decoders take any
    if timeout <= 0 or environ.get("gunicorn.socket") is None:  # no socket wait to bound
        return _read_exactly(stream, length)
    with _idle_timeout(environ, timeout):
        return _read_exactly(stream, length)


@contextmanager
def _idle_timeout(environ: dict, timeout: float):
    """Reads through ``wsgi.input`` (chunked bodies, the fallback): each wait on the socket is
    bounded by ``timeout``, a bound per gap rather than on the whole body."""
    sock = environ.get("gunicorn.socket")
    if sock is None or timeout <= 0:
        yield
        return
    previous = sock.gettimeout()
    sock.settimeout(timeout)
    try:
        yield
    except TimeoutError:
        environ["wsgi.input"].failed = True  # where the next request starts is unknown: close
        raise _too_slow(None, environ.get("CONTENT_LENGTH") or "the", timeout) from None
    finally:
        sock.settimeout(previous)


def _too_slow(got: int | None, length: int | str, timeout: float) -> VerbError:
    what = f"{got} of {length}" if got is not None else f"not all of {length}"
    return VerbError(408, f"request body too slow: {what} bytes arrived within {timeout:g} s "
                     "(body_timeout); the connection is closed", headers=(("Connection", "close"),))


def _content_length(environ: dict) -> int | None:
    text = environ.get("CONTENT_LENGTH") or ""
    if not text:
        return None if _is_chunked(environ) else 0
    if not text.isdigit():
        raise VerbError(400, f"Content-Length {text!r} is not a number of bytes")
    return int(text)


def _is_chunked(environ: dict) -> bool:
    return "chunked" in environ.get("HTTP_TRANSFER_ENCODING", "").lower() or \
        environ.get("wsgi.input_terminated", False)


def _read_exactly(stream, length: int) -> bytes:
    data = stream.read(length) if length else b""
    if len(data) < length:
        parts = [data]
        got = len(data)
        while got < length:
            more = stream.read(length - got)
            if not more:
                raise _ended(got, length)
            parts.append(more)
            got += len(more)
        data = b"".join(parts)
    return data


def _ended(got: int, length: int) -> VerbError:
    return VerbError(400, f"body ended after {got} of the {length} bytes its Content-Length announced")


def _read_unsized(stream, limit: int) -> bytes:
    parts: list[bytes] = []
    total = 0
    while True:
        chunk = stream.read(CHUNK)
        if not chunk:
            return b"".join(parts)
        total += len(chunk)
        if total > limit:
            raise _too_large(total, limit, at_least=True)
        parts.append(chunk)


def _too_large(size: int, limit: int, at_least: bool = False) -> VerbError:
    told = f"more than {limit}" if at_least else str(size)
    return VerbError(413, f"request body of {told} bytes is over this verb's limit of {limit} "
                     "bytes; raise body_limit / body_limits in the configuration",
                     headers=(("Connection", "close"),))
