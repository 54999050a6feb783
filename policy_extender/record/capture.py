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

from policy_extender.session.cache import NOT_READ
from policy_extender.verb_names import kube_scheduler
from policy_extender.verb_names.volcano import ALLOCATE, DEALLOCATE, JOB_ENQUEUED, ON_SESSION_CLOSE, ON_SESSION_OPEN

from .recorder import Recorder
from .redact import annotation_keys_read, parse_kinds

#: verbs whose handler reads ``sessions.head()`` itself rather than through the SessionCache
READS_HEAD_ITSELF = frozenset({ON_SESSION_CLOSE, ALLOCATE, DEALLOCATE, JOB_ENQUEUED})
#: verbs of a scheduler without sessions (kube-scheduler's): recorded outside any cycle, with the
#: version of the set that answered them (the current one)
WITHOUT_SESSION = frozenset(kube_scheduler.VERB_KINDS)


class Capture:
    """One verb call being recorded."""

    def __init__(self, service: Any, kind: str, environ: dict) -> None:
        self.service, self.kind = service, kind
        self.started_ns = time.time_ns()
        self.head = NOT_READ
        if kind in WITHOUT_SESSION:
            self.head = None
        elif kind in READS_HEAD_ITSELF:
            self.head = service.sessions.head()
        elif kind != ON_SESSION_OPEN:
            service.session_cache.forget_last_head()

    def finish(self, status: int, response: bytes, request: bytes | None) -> None:
        head: Any = self.head  # a Head, None (no session) or NOT_READ (replaced below)
        if self.kind not in READS_HEAD_ITSELF and self.kind != ON_SESSION_OPEN and self.kind not in WITHOUT_SESSION:
            head = self.service.session_cache.last_head()  # what the handler's env() read
        if head is NOT_READ or self.kind == ON_SESSION_OPEN:  # refused before the handler ran
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
