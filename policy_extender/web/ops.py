"""The ops blueprint: ``/healthz``, ``/readyz``, ``/status`` and ``/metrics`` (not verbs)."""

from __future__ import annotations

import os

from flask import Blueprint, Response, jsonify

from policy_extender import metrics as exporter
from policy_extender.decide.unserved import rules_not_called
from policy_extender.service import Service
from policy_extender.session.store import SessionLost, StoreUnavailable
from policy_extender.web.current import service

ops = Blueprint("ops", __name__)


@ops.get("/healthz")
def healthz():
    """The worker answers (liveness): says nothing about the policies."""
    return jsonify(status="ok")


@ops.get("/readyz")
def readyz():
    """200 only once a good policy set is loaded; 503 with the load errors before."""
    status = service().policy_status
    if status.ready:
        return jsonify(status="ready", version=status.version)
    return jsonify(status="not ready", errors=list(status.errors)), 503


@ops.get("/status")
def status():
    """Policy version, when loaded, files, last reload errors, the session head, the calls of the
    two most recent cycles that came without a session or with a job the snapshot lacks, and the
    instance's private runtime directory (null outside ``serve``)."""
    svc = service()
    policy = svc.policy_status.as_dict()
    gaps = svc.session_gaps.status() if svc.session_gaps is not None else None
    return jsonify(policy=policy, policy_version=policy["version"], loaded_at=policy["loaded_at"],
                   files=policy["files"], session=_session(svc), pid=os.getpid(),
                   runtime_dir=svc.runtime_dir,
                   verbs={path: kind for path, kind in svc.routes.items()}, session_gaps=gaps,
                   rules_not_called=_rules_not_called(svc))


def _rules_not_called(svc: Service) -> dict | None:
    """Rules whose verb Volcano has not called in the last cycles, read afresh (decide.unserved)."""
    try:
        head = svc.sessions.head()
        return rules_not_called(svc.policies.current, svc.tally, svc.unserved.cycles,
                                head.session_id if head is not None else None)
    except Exception as exc:  # a store that fails or refuses the tally: /status still answers
        return {"error": f"{type(exc).__name__}: {exc}"}


def _session(svc: Service) -> dict | None:
    try:
        head = svc.sessions.head()
    except (SessionLost, StoreUnavailable) as exc:  # the verbs answer 503; /status says why
        return {"error": str(exc)}
    if head is None:
        return None
    return {"id": head.session_id, "seq": head.seq, "policy_version": head.policy_version,
            "opened_at": head.opened_at}


@ops.get("/metrics")
def metrics():
    body, content_type = exporter.render()
    return Response(body, content_type=content_type)
