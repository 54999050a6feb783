"""Bodies decoded while they arrive: the hand-over from the body reader to the verb's decoder.

``web.dispatch.read_request`` feeds a stream (``wire.open_stream.OpenStream`` for onSessionOpen,
``wire.prioritize_stream.PrioritizeStream`` for prioritize) while the body arrives, then hands
it over for this thread's handler, which takes it for that same body object or decodes whole.
"""

from __future__ import annotations

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
