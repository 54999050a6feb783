"""Volcano's extender response types, as its Go client decodes them, for strict decoding in tests.

Each Struct mirrors a Go struct of ``pkg/scheduler/plugins/extender``: a JSON value whose type
does not fit the Go field is an error here as it is in ``encoding/json`` (an ``int`` answered
``2.0`` fails). Unknown keys are ignored, as Go ignores them. Fields are required so a missing
key (which Go would read as the zero value) shows up as a test failure rather than a silent
default: the service must answer every field.
"""

from __future__ import annotations

from typing import Any

import msgspec


class PredicateResponse(msgspec.Struct):
    status: str
    code: int


class PrioritizeResponse(msgspec.Struct):
    nodeScore: dict[str, float]
    errorMessage: str


class VictimsResponse(msgspec.Struct):
    """PreemptableResponse and ReclaimableResponse."""

    status: int
    victims: list[dict[str, Any]] | None


class JobEnqueueableResponse(msgspec.Struct):
    status: int


class QueueOverusedResponse(msgspec.Struct):
    overused: bool


class JobReadyResponse(msgspec.Struct):
    status: bool


class EventResponse(msgspec.Struct):
    """allocateFunc and deallocateFunc."""

    errorMessage: str


class ErrorBody(msgspec.Struct):
    error: str


RESPONSE_TYPES: dict[str, type | None] = {
    "onSessionOpen": None, "onSessionClose": None, "jobEnqueued": None,
    "predicate": PredicateResponse, "prioritize": PrioritizeResponse,
    "preemptable": VictimsResponse, "reclaimable": VictimsResponse,
    "jobEnqueueable": JobEnqueueableResponse, "queueOverused": QueueOverusedResponse,
    "jobReady": JobReadyResponse, "allocateFunc": EventResponse, "deallocateFunc": EventResponse,
}


def decode(kind: str, body: bytes) -> Any:
    """The response body of verb ``kind`` decoded strictly (raises msgspec.ValidationError)."""
    response_type = RESPONSE_TYPES[kind]
    if response_type is None:
        return None
    return msgspec.json.decode(body, type=response_type)


def decode_error(body: bytes) -> ErrorBody:
    return msgspec.json.decode(body, type=ErrorBody)
