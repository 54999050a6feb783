"""Bodies decoded while they arrive: the hand-over from the body reader to the verb's decoder,
and where an entry of a Go-encoded map or list begins.

``web.dispatch.read_streamed`` feeds a stream (``wire.open_stream.OpenStream`` for onSessionOpen,
``wire.prioritize_stream.PrioritizeStream`` for prioritize) while the body arrives, then hands
it over for this thread's handler, which takes it for that same body object or decodes whole.
``entry_start`` finds the candidate element starts both streams, and ``wire.node_reuse``'s walk
of a prioritize list, cut at (each cut is verified by a decode).
"""

from __future__ import annotations

import re
import threading
from typing import Any

#: this thread's body decoded while it arrived: (body, policy set, stream)
_handed = threading.local()


def hand_over(body: Any, policy_set: Any, stream: Any) -> None:
    """The body reader's stream, for this thread's handler (``take``)."""
    _handed.stream = (body, policy_set, stream)


def drop() -> None:
    """Forget what this thread's body reader handed over and no handler took (a call answered
    before its body was decoded, e.g. 503 when the session store is lost): it holds the body,
    up to the verb's body limit, until this thread's next call otherwise."""
    _handed.stream = None


def take(body: Any) -> tuple[Any, Any] | None:
    """(policy set, stream) handed over for ``body`` by this thread's body reader, else None;
    whatever was handed over is dropped either way (it holds the body)."""
    found, _handed.stream = getattr(_handed, "stream", None), None
    if found is None or found[0] is not body:
        return None
    return found[1], found[2]


def feed_in_steps(stream: Any, length: int, step: int) -> Any:
    """``stream`` fed as if its ``length`` bytes arrived ``step`` at a time, each time until it
    has nothing more to do (tests and benchmarks; the body must already be all there)."""
    for received in range(step, length, step):
        while stream.feed(received):
            pass
    return stream


#: longest key or name before an entry's literal tail that an entry start is recognised with
HEAD_BYTES = 1024


def entry_start(buffer: Any, entry: re.Pattern, head: bytes, tail: bytes, start: int, end: int) -> int:
    """Where the first ``entry`` in ``buffer[start:end]`` begins (at ``head``), or -1. Found by its
    literal ``tail`` (``bytes.find``, ~4x faster than the regex's own scan on JSON), then the regex
    matched from the ``head`` before it."""
    while True:
        at = buffer.find(tail, start, end)
        if at < 0:
            return -1
        found_head = buffer.rfind(head, max(start, at - HEAD_BYTES), at)
        if found_head >= 0:
            found = entry.match(buffer, found_head, at + len(tail))
            if found is not None and found.end() == at + len(tail):
                return found_head
        start = at + 1
