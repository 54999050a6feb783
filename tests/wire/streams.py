"""What the tests of the two bodies decoded while they arrive (``wire.open_stream``,
``wire.prioritize_stream``) check alike."""

from __future__ import annotations

import pytest

from policy_extender.errors import WireError
from policy_extender.wire import arriving


def error_of(fn) -> str:
    with pytest.raises(WireError) as caught:
        fn()
    return str(caught.value)


def assert_fails_like_the_whole_decoder(stream_type, body: bytes, reads, expected: str) -> None:
    """Fed in two arrival plans, a stream of ``body`` ends in the whole decoder's ``expected``
    error (message and JSON path) and leaves the body as it arrived."""
    for step, piece in ((1 << 20, 1 << 20), (65536, 512 << 10)):
        buffer = bytearray(body)
        stream = stream_type(buffer, len(buffer), reads, piece_bytes=piece, stream_from=0)
        arriving.feed_in_steps(stream, len(buffer), step)
        assert error_of(stream.finish) == expected
        assert buffer == body
