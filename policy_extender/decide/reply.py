"""A verb's answer (``Reply``) and the error that answers a call with another status
(``VerbError``): what the handlers return or raise, whatever carries them (HTTP, replay, fixtures).
"""

from __future__ import annotations

import msgspec
import orjson


class VerbError(Exception):
    """An answer other than 200: ``status``, and ``message`` for the ``{"error": ...}`` body."""

    def __init__(self, status: int, message: str, headers: tuple[tuple[str, str], ...] = ()):
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = headers


class Reply(msgspec.Struct, frozen=True, gc=False):
    """A verb's answer and what it decided (for the log line and the metrics). A frozen msgspec
    Struct, built in C: one is built per call, and a frozen dataclass sets each field through
    ``object.__setattr__`` (12,500 instructions), a NamedTuple through a Python ``__new__``
    (about 4,000; ``bench.cpu.instructions``). Holds no containers, so the GC never tracks it."""

    body: bytes
    status: int = 200
    decision: str = ""
    rule: str = ""
    headers: tuple[tuple[str, str], ...] = ()


def error_reply(status: int, message: str, headers: tuple[tuple[str, str], ...] = ()) -> Reply:
    return Reply(orjson.dumps({"error": message}), status, "error", "", headers)
