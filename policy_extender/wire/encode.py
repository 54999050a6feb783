"""Responses exactly as Volcano's Go client decodes them (``extender/argument.go``).

Each encoder takes the policy set's decision (duck-typed: the attributes named in
docs/architecture.md, or a plain value) and returns JSON bytes whose types fit the Go fields:
ints are ints (never bools), bools are bools, scores are finite floats, ``nodeScore`` and
``victims`` are never null. Victims are the evictee objects exactly as they were sent.

The JSON keys are the Go structs' json tags: the predicate's reason goes under ``status``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

import msgspec

_ENCODER = msgspec.json.Encoder()

PERMIT, ABSTAIN, REJECT = 1, 0, -1
SUCCESS, ERROR = 0, 1
#: the answer of every predicate that fits (bytes are immutable: one for all)
#: the predicate's answer for a node that fits
FITS = _ENCODER.encode({"status": "", "code": SUCCESS})


class EncodeError(ValueError):
    """A decision that cannot be put on the wire (a non-finite score, a status out of range).

    This is the service's fault, not the scheduler's: answer 500 and let ``ignorable`` decide.
    """


def _int(value, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, float) and value.is_integer():
            return int(value)
        raise EncodeError(f"{what} must be an integer, got {value!r}")
    return value


def _status(value, what: str) -> int:
    status = _int(value, what)
    if status not in (PERMIT, ABSTAIN, REJECT):
        raise EncodeError(f"{what} must be 1 (Permit), 0 (Abstain) or -1 (Reject), got {status}")
    return status


def _finite(value, node: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise EncodeError(f"score of node {node!r} must be a number, got {value!r}")
    value = float(value)
    if not math.isfinite(value):
        raise EncodeError(f"score of node {node!r} is {value}; JSON (and Volcano) need a finite number")
    return value


def _value(decision, attribute: str):
    """``decision.attribute`` for a decision object, or the decision itself for a plain value."""
    if isinstance(decision, (bool, int, float, str, Mapping)) or decision is None:
        return decision
    return getattr(decision, attribute)


# ------------------------------------------------------------------ responses

def predicate(decision) -> bytes:
    """``{"status": reason, "code": int}``: empty status means the node fits.

    ``decision`` has ``fits``, ``code`` and ``reason`` (and ``rule``). A rejection always carries
    a non-empty reason and a non-zero code (Volcano turns code 0 into 1 anyway).
    """
    if decision.fits:
        return FITS
    code = _int(decision.code or ERROR, "predicate code")
    reason = str(decision.reason or "") or f"rejected by policy rule {getattr(decision, 'rule', '') or '?'}"
    return _ENCODER.encode({"status": reason, "code": code})


def prioritize(decision, nodes: Iterable | None = None) -> bytes:
    """``{"nodeScore": {node: float}, "errorMessage": ""}``; every node in ``nodes`` gets a score
    (0 when no rule scored it), and ``nodeScore`` is ``{}``, never null."""
    scores = _value(decision, "scores") or {}
    out = {str(name): _finite(score, name) for name, score in scores.items()}
    for node in nodes or ():
        name = node if isinstance(node, str) else node.name
        if name:
            out.setdefault(name, 0.0)
    return _ENCODER.encode({"nodeScore": out, "errorMessage": ""})


def victims(decision, evictees) -> bytes:
    """``{"status": int, "victims": [TaskInfo]}``: each victim is the evictee object exactly as
    sent (``evictees``: the request's ``raw_evictees``, or the VictimsRequest itself).

    ``decision.victims`` are indexes into the evictees; ``victims`` is ``[]``, never null.
    """
    raws: Sequence[msgspec.Raw] = getattr(evictees, "raw_evictees", evictees)
    chosen = []
    for index in decision.victims or ():
        index = _int(index, "victim index")
        if not 0 <= index < len(raws):
            raise EncodeError(f"victim index {index} is out of range: {len(raws)} evictees were sent")
        chosen.append(raws[index])
    return _ENCODER.encode({"status": _status(decision.status, "victims status"), "victims": chosen})


def enqueueable(decision) -> bytes:
    """``{"status": 1 | 0 | -1}`` (Permit, Abstain, Reject)."""
    return _ENCODER.encode({"status": _status(_value(decision, "status"), "jobEnqueueable status")})


def overused(decision) -> bytes:
    """``{"overused": bool}``."""
    return _ENCODER.encode({"overused": bool(_value(decision, "value"))})


def ready(decision) -> bytes:
    """``{"status": bool}``: true lets the job be ready (a service with no opinion says true)."""
    return _ENCODER.encode({"status": bool(_value(decision, "value"))})


def event(error_message: str = "") -> bytes:
    """allocateFunc / deallocateFunc: ``{"errorMessage": ""}`` accepts the event."""
    return _ENCODER.encode({"errorMessage": str(error_message or "")})


def empty() -> bytes:
    """onSessionOpen, onSessionClose, jobEnqueued: Volcano does not read the body."""
    return b"{}"

