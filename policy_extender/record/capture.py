"""The service's recording hook: one verb call in, one ``Recorder.record`` out.

``begin(service, kind, environ)`` notes the start time and, for the verbs whose handler does not
read the session through the worker's SessionCache (onSessionClose, which ends the session it
names, and the allocate/deallocate events), the session the call belongs to (one ``head()``
read); the deciding verbs' session is the head their handler's ``SessionCache.env()`` read, so
recording costs them no second read. kube-scheduler's verbs belong to no session: they are
recorded with the calls outside a session (``recorder.cycle_name``), each with the version of the
set that answered it.
``finish`` gets the body the dispatch read (b"" when it was not read whole: a 413, a body cut
short), names the session an onSessionOpen created, and queues the call. ``wsgi.input`` is left
alone, so the body is still read straight from gunicorn's socket (``web/socket_body.py``).
"""

from __future__ import annotations

import time
from typing import Any

from policy_extender.decide.table import SESSION_CACHE, SESSION_NONE, SESSION_OPENS, SESSION_STORE
from policy_extender.decide.verbs import EVERY_VERB
from policy_extender.session.cache import NOT_READ

from .recorder import Recorder
from .redact import annotation_keys_read, parse_kinds



class Capture:
    """One verb call being recorded, in the cycle its handler saw: how it reads the session head
    is its verb's ``session`` (``decide.table.Verb``). A call of a scheduler without sessions
    (kube-scheduler's) is recorded outside any cycle, with the version of the set that answered
    it (the current one)."""

    def __init__(self, service: Any, kind: str, environ: dict) -> None:
        self.service, self.kind = service, kind
        self.session = EVERY_VERB[kind].session
        self.started_ns = time.time_ns()
        self.head = NOT_READ
        if self.session == SESSION_NONE:
            self.head = None
        elif self.session == SESSION_STORE:  # its handler reads sessions.head() itself
            self.head = service.sessions.head()
        elif self.session == SESSION_CACHE:
            service.session_cache.forget_last_head()

    def finish(self, status: int, response: bytes, request: bytes | None) -> None:
        head: Any = self.head  # a Head, None (no session) or NOT_READ (replaced below)
        if self.session == SESSION_CACHE:
            head = self.service.session_cache.last_head()  # what the handler's env() read
        if head is NOT_READ or self.session == SESSION_OPENS:  # refused before the handler ran
            head = self.service.sessions.head()
        version = head.policy_version if head is not None else _current_version(self.service)
        self.service.recorder.record(
            head.session_id if head is not None else None, self.kind, bytes(request or b""), status,
            response, version, started_ns=self.started_ns,
            opened_at=head.opened_at if head is not None else None)


def _current_version(service: Any) -> str:
    current = service.policies.current
    return current.version if current is not None else ""


def begin(service: Any, kind: str, environ: dict) -> Capture | None:
    """A Capture when the service records, else None (the cost of recording off: one attribute)."""
    if getattr(service, "recorder", None) is None:
        return None
    return Capture(service, kind, environ)


def recorder_for(config: Any, policies: Any, sessions: Any) -> Any:
    """The Recorder ``config`` asks for (``record`` set), or None; annotation keys kept under
    redaction are those the answering policy version names (see ``redact``)."""
    if not getattr(config, "record", ""):
        return None

    def annotation_keys(version: str) -> frozenset[str]:
        return annotation_keys_read(policies.pinned(version, sessions.policy_sources).sources)

    return Recorder(config.record, sample=config.record_sample, max_bytes=config.record_max_bytes,
                    redact_kinds=parse_kinds(config.record_redact),
                    annotation_keys=annotation_keys)
