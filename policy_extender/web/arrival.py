"""What a request is while the worker's event loop receives it (``web.worker``): the bytes so far
and its deadline (``Arrival``), and how a large body that arrives fast is taken in
``MSG_WAITALL`` steps without making the event loop wait for a slow one (``receive_into``)."""

from __future__ import annotations

import socket
import ssl
import struct
import time
from typing import Any


class Arrival:
    """A request being received on the event loop: the bytes so far and its deadline."""

    __slots__ = ("data", "started", "deadline", "handshake", "progressed", "held", "body", "got", "fast")

    def __init__(self, data: bytes | bytearray, started: float, deadline: float, handshake: bool = False) -> None:
        self.data = bytearray(data)
        self.started, self.deadline = started, deadline
        #: a new TLS connection whose handshake is not done yet
        self.handshake = handshake
        #: when bytes last arrived (the connection that made no progress longest is closed first
        #: when the worker's bodies in flight reach ``body_memory``)
        self.progressed = started
        #: bytes of this request counted in the worker's ``held`` (what it received so far)
        self.held = 0
        #: a body of ``MAPPED_FROM`` bytes and more, received into its own map (``data`` then holds
        #: only the headers), and how much of it arrived
        self.body: Any = None
        self.got = 0
        #: its last turn found the body arriving fast throughout (``receive_into``)
        self.fast = False


def receive_into(sock: Any, arrival: Arrival) -> bool:
    """Receive into ``arrival.body`` from ``arrival.got`` on what has arrived on the non-blocking
    ``sock``; True when the client closed its side.

    A body that arrives fast (a first ``recv`` found ``FAST_BYTES`` there: Volcano's snapshot, sent
    from memory) is then taken in ``WAITALL_BYTES`` steps, each one ``recv_into`` with
    ``MSG_WAITALL`` that waits at most ``STEP_WAIT_SECONDS`` (``SO_RCVTIMEO``): the kernel copies
    the bytes as they come and the event loop runs once per step instead of once per packet burst
    (256 MB: about 430 ms of the connection's time before dispatch in 64 KiB bursts, against the
    thread's 290). A step that times out part-way (the client slowed) ends the turn, and so do
    ``TURN_BYTES`` or ``TURN_SECONDS``: the event loop then serves the other connections. A client
    that trickles never has ``FAST_BYTES`` there, so it never makes the event loop wait."""
    body = arrival.body
    arrival.fast = False
    with memoryview(body) as view:
        try:
            size = min(RECV_BODY_BYTES, len(body) - arrival.got)
            received = sock.recv_into(view[arrival.got:arrival.got + size], size)
        except (BlockingIOError, InterruptedError, ssl.SSLWantReadError, ssl.SSLWantWriteError):
            return False
        if not received:
            return True
        arrival.got += received
        if received < FAST_BYTES or type(sock) is not socket.socket or not hasattr(socket, "MSG_WAITALL"):
            return False
        return _receive_waitall_turn(sock, view, arrival)


def _receive_waitall_turn(sock: socket.socket, view: memoryview, arrival: Arrival) -> bool:
    """``receive_into``'s steps for a fast body, on the socket made blocking for them."""
    turn_ends = time.monotonic() + TURN_SECONDS
    turn = 0
    sock.setblocking(True)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, _STEP_WAIT)
    try:
        while arrival.got < len(view) and turn < TURN_BYTES and time.monotonic() < turn_ends:
            size = min(WAITALL_BYTES, len(view) - arrival.got)
            try:
                received = sock.recv_into(view[arrival.got:arrival.got + size], size, socket.MSG_WAITALL)
            except (BlockingIOError, InterruptedError, TimeoutError):
                break
            if not received:
                return True
            arrival.got += received
            turn += received
            if received < size:  # the step timed out part-way: the client slowed
                break
        else:  # the turn's bound reached with the body still arriving fast
            arrival.fast = arrival.got < len(view)
    finally:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, _NO_WAIT)
        sock.setblocking(False)
    return False


#: bytes one non-blocking ``recv_into`` of a body takes at most; what it must find there for the
#: body to count as arriving fast; one ``MSG_WAITALL`` step; what one turn takes at most
RECV_BODY_BYTES = 4 << 20
FAST_BYTES = 256 << 10
WAITALL_BYTES = 2 << 20
TURN_BYTES = 64 << 20
#: seconds one step may wait for its bytes, and one turn at most
STEP_WAIT_SECONDS = 0.005
TURN_SECONDS = 0.05
_STEP_WAIT = struct.pack("ll", 0, int(STEP_WAIT_SECONDS * 1e6))
_NO_WAIT = struct.pack("ll", 0, 0)
