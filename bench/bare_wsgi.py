"""The HTTP floor: a bare WSGI app that reads the whole body and returns each verb's constant
neutral answer. Served under the same gunicorn settings as the service (``bench.server``), its
requests/s are the most any Python extender can do on this machine and this gunicorn config.

``app`` reads the body through gunicorn's ``wsgi.input`` (what a plain WSGI app does);
``socket_app`` reads it the way the service does (``web.http.read_body``, straight from
gunicorn's socket), the stricter floor: the service's own body-read gain does not count in its
ratio against it.
"""

from __future__ import annotations

import mmap

NEUTRAL_ANSWERS: dict[str, bytes] = {
    "onSessionOpen": b"{}",
    "onSessionClose": b"{}",
    "predicate": b'{"status":"","code":0}',
    "prioritize": b'{"nodeScore":{},"errorMessage":""}',
    "preemptable": b'{"status":0,"victims":null}',
    "reclaimable": b'{"status":0,"victims":null}',
    "jobEnqueueable": b'{"status":0}',
    "jobEnqueued": b"{}",
    "queueOverused": b'{"overused":false}',
    "jobReady": b'{"status":true}',
    "allocateFunc": b'{"errorMessage":""}',
    "deallocateFunc": b'{"errorMessage":""}',
}
#: kube-scheduler's verbs at their default paths (``kube_scheduler_prefix``), each answered empty
KUBE_SCHEDULER_ANSWERS: dict[str, bytes] = {
    "filter": b'{"Nodes":{"metadata":{},"items":[]},"NodeNames":null,"FailedNodes":{},'
              b'"FailedAndUnresolvableNodes":{},"Error":""}',
    "prioritize": b"[]",
    "preempt": b'{"NodeNameToMetaVictims":{}}',
}
ROUTES = {f"/{verb}": answer for verb, answer in NEUTRAL_ANSWERS.items()} | \
    {f"/kube-scheduler/{verb}": answer for verb, answer in KUBE_SCHEDULER_ANSWERS.items()}
CHUNK = 1 << 20


def read_body(environ: dict) -> int:
    """Reads and discards the body; returns its size (the service must read it too)."""
    stream, left = environ["wsgi.input"], int(environ.get("CONTENT_LENGTH") or 0)
    while left > 0:
        chunk = stream.read(min(left, CHUNK))
        if not chunk:
            break
        left -= len(chunk)
    return int(environ.get("CONTENT_LENGTH") or 0) - left


def _respond(start_response, answer: bytes | None) -> list[bytes]:
    """The verb's neutral answer, or 404 for a path that is no verb."""
    if answer is None:
        start_response("404 Not Found", [("Content-Type", "text/plain"), ("Content-Length", "9")])
        return [b"not found"]
    start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(answer)))])
    return [answer]


def app(environ: dict, start_response):
    read_body(environ)
    return _respond(start_response, ROUTES.get(environ.get("PATH_INFO", "")))


def socket_app(environ: dict, start_response):
    from policy_extender.web.http import read_body as service_read_body
    service_read_body(environ, 1 << 30)
    return _respond(start_response, ROUTES.get(environ.get("PATH_INFO", "")))


def kept_socket_app(environ: dict, start_response):
    """``socket_app`` with the buffer preallocated once: each body's map is given back after the
    answer, as the service does (``keep_body_maps``), so the next body of about its size is
    received into memory touched before (``web.socket_body.give_back``)."""
    from policy_extender.web.dispatch import AnswerThenRelease
    from policy_extender.web.http import read_body as service_read_body
    body = service_read_body(environ, 1 << 30)
    reply = _respond(start_response, ROUTES.get(environ.get("PATH_INFO", "")))
    if type(body) is mmap.mmap:
        return AnswerThenRelease(reply[0], body)
    return reply
