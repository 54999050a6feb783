"""A verb's answer (``Reply``) and the error that answers a call with another status
(``VerbError``): what the handlers return or raise, whatever carries them (HTTP, replay, fixtures).
"""

from __future__ import annotations

from typing import NamedTuple

import orjson


class VerbError(Exception):
    """An answer other than 200: ``status``, and ``message`` for the ``{"error": ...}`` body."""

    def __init__(self, status: int, message: str, headers: tuple[tuple[str, str], ...] = ()):
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = headers


class Reply(NamedTuple):
    """A verb's answer and what it decided (for the log line and the metrics). A NamedTuple, not a
    frozen dataclass: one is built per call, and a frozen dataclass sets each field through
    ``object.__setattr__`` (``bench.instructions``)."""

    body: bytes
    status: int = 200
    decision: str = ""
    rule: str = ""
    headers: tuple[tuple[str, str], ...] = ()


def error_reply(status: int, message: str, headers: tuple[tuple[str, str], ...] = ()) -> Reply:
    return Reply(orjson.dumps({"error": message}), status, "error", "", headers)
