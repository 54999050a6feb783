"""A verb's answer (``Reply``) and the error that answers a call with another status
(``VerbError``): what the handlers return or raise, whatever carries them (HTTP, replay, fixtures).
"""

from __future__ import annotations

from dataclasses import dataclass

import orjson


class VerbError(Exception):
    """An answer other than 200: ``status``, and ``message`` for the ``{"error": ...}`` body."""

    def __init__(self, status: int, message: str, headers: tuple[tuple[str, str], ...] = ()):
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = headers


@dataclass(frozen=True)
class Reply:
    """A verb's answer and what it decided (for the log line and the metrics)."""

    body: bytes
    status: int = 200
    decision: str = ""
    rule: str = ""
    headers: tuple[tuple[str, str], ...] = ()


def error_reply(status: int, message: str, headers: tuple[tuple[str, str], ...] = ()) -> Reply:
    return Reply(orjson.dumps({"error": message}), status, "error", "", headers)
