"""Reading a request body of known length straight from gunicorn's socket into one buffer.

gunicorn's ``wsgi.input`` (``gunicorn.http.body.Body`` over a ``LengthReader`` over a
``SocketUnreader``) passes every ``recv()`` through two ``BytesIO`` buffers and copies the data
three or four times on the way; for a 6.7 MB prioritize body that is milliseconds, for a 268 MB
snapshot most of a second, and it doubles the peak memory. Here the bytes gunicorn already holds
(read ahead with the headers) are taken first, the rest is ``recv_into`` one preallocated
``bytearray``, and the reader is marked consumed, so gunicorn finds the body read and keeps the
connection alive for the next request.

Only when the objects are exactly the gunicorn internals this was written against (pinned by a
test under a real gunicorn, keep-alive requests following a large body); anything else (another
server, a chunked body, a wrapped ``wsgi.input``, a partly read body) returns None and the caller
reads through ``wsgi.input`` as before. The ``bytearray`` returned is never written again: msgspec
``Raw`` values decoded from it keep pointing into it.

Bodies of ``MAPPED_FROM`` bytes and more (snapshots, large prioritize calls) go into an anonymous
``mmap`` instead: ``bytearray(n)`` mallocs, zero-fills and faults in every page from Python (0.33 s
for 268 MB here). The map is not populated up front (``MAP_POPULATE``): each page is then faulted
in by the kernel's copy of the bytes that fill it, while the data flows, instead of all of them
before the first byte is read (measured: the recv_into floor's 269 MB open 147-176 ms against
208-216 populated; a streamed 97 MB prioritize 105-113 ms against 112-118, in 5 paired runs).
The map is unmapped when the last reference to it goes.

The map is advised ``MADV_HUGEPAGE`` (configuration ``huge_pages``, on by default): where the
kernel's transparent huge pages are ``madvise`` or ``always`` (the usual defaults), the body is
faulted in 2 MiB pages, 128 faults for 256 MB instead of 65,536. Receiving 256 MB over a local
socket: median 73 ms against 130 ms, 72 ms of system time against 128 (``python -m
bench.huge_pages``). Off, or where the kernel has them ``never``, 4 KiB pages as before.
"""

from __future__ import annotations

import io
import mmap
import socket
import struct
import threading
import time
from typing import Any, Callable

try:  # gunicorn is what serves the service; tests and the fixture runner may run without it
    from gunicorn.http.body import Body, LengthReader
    from gunicorn.http.unreader import SocketUnreader
except ImportError:  # pragma: no cover - the plain read is then the only path
    Body = LengthReader = SocketUnreader = None


#: bodies this large are read into an anonymous mmap (above glibc's largest malloc mmap threshold)
MAPPED_FROM = 32 << 20
_MAP_FLAGS = mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS


class BodyEnded(Exception):
    """The client closed the connection before sending ``length`` bytes; ``got`` were read."""

    def __init__(self, got: int) -> None:
        super().__init__(got)
        self.got = got


class BodyTimeout(BodyEnded):
    """The body was not all there by the deadline (a slow or stalled client); ``got`` were read."""


#: ``consumer(buffer)`` -> ``feed(received) -> bool``: work on the body while the rest arrives
Consumer = Callable[[Any], Callable[[int], bool]]


def read_from_socket(environ: dict, length: int, deadline: float | None = None,
                     consumer: Consumer | None = None) -> bytes | bytearray | mmap.mmap | None:
    """The body of ``length`` bytes read from gunicorn's socket, or None when not applicable.

    ``deadline`` (a ``time.monotonic()`` value) bounds the whole read: a client that trickles
    its body cannot hold the worker thread past it (``BodyTimeout``).

    ``consumer``, when the body is not all there yet, is called with the buffer once allocated;
    the ``feed`` it returns is called in this thread with the number of bytes arrived so far,
    again as long as it returns True (it did some work), else once more arrived, while another
    thread receives the rest (``_receive_feeding``). It may read the bytes before that number
    (and rewrite them for a moment), never the rest.
    """
    reader = _length_reader(environ, length)
    if reader is None:
        return None
    stream = environ["wsgi.input"]
    try:
        return _read(reader, length, deadline, consumer)
    except BaseException:
        stream.failed = True  # where the next request starts is unknown: gunicorn closes
        raise


def _length_reader(environ: dict, length: int) -> Any:
    """gunicorn's untouched LengthReader of this request over its socket, else None."""
    stream = environ.get("wsgi.input")
    if Body is None or type(stream) is not Body or length <= 0:
        return None
    reader = getattr(stream, "reader", None)
    if type(reader) is not LengthReader or reader.length != length or stream.buf.tell() != 0:
        return None
    unreader = reader.unreader
    if type(unreader) is not SocketUnreader or unreader.sock is not environ.get("gunicorn.socket"):
        return None
    if not isinstance(getattr(unreader, "buf", None), io.BytesIO):
        return None
    return reader


def _buffer(length: int) -> bytearray | mmap.mmap:
    if length < MAPPED_FROM:
        return bytearray(length)
    mapped = mmap.mmap(-1, length, flags=_MAP_FLAGS)
    if _huge_pages and _HUGE is not None:
        try:
            mapped.madvise(_HUGE)
        except OSError:  # a kernel without transparent huge pages: 4 KiB pages
            pass
    return mapped


_HUGE = getattr(mmap, "MADV_HUGEPAGE", None)
_huge_pages = True


def configure(huge_pages: bool) -> None:
    """``huge_pages`` (the configuration's): mapped bodies are ``MADV_HUGEPAGE``, or not."""
    global _huge_pages
    _huge_pages = bool(huge_pages)


def _read(reader: Any, length: int, deadline: float | None,
          consumer: Consumer | None = None) -> bytes | bytearray | mmap.mmap:
    unreader = reader.unreader
    buffered = unreader.buf.getvalue()
    unreader.buf = io.BytesIO()
    if len(buffered) >= length:  # the whole body came with the headers
        unreader.buf.write(buffered[length:])  # a pipelined next request stays for gunicorn
        reader.length = 0
        return buffered[:length]
    body = _buffer(length)
    with memoryview(body) as view:
        view[:len(buffered)] = buffered
        if consumer is None:
            _receive_into(unreader.sock, view, len(buffered), deadline)
        else:
            _receive_feeding(unreader.sock, view, len(buffered), deadline, consumer(body))
    reader.length = 0
    return body


def _receive_feeding(sock: Any, view: memoryview, got: int, deadline: float | None,
                     feed: Callable[[int], bool]) -> None:
    """``_receive_into`` in a helper thread (``recv_into`` releases the GIL, so the kernel's
    copy runs while this thread works), ``feed(arrived)`` here while it finds work. Between two
    feeds, once ``YIELD_SECONDS`` passed since it last did, this thread lets go of the GIL
    (``time.sleep(0)``): the receiver needs it for a moment after each ``recv_into``, and would
    otherwise wait out the interpreter's switch interval (5 ms) while the socket's buffer is full
    and the client stalls. Not after every feed: a feed may be one job of ~0.07 ms, and each
    ``sleep(0)`` that hands the GIL over costs up to ~0.1 ms (1,540 of them took 100 ms of a
    500 x 30 open)."""
    arrived = threading.Event()
    progress = [got, False, None]  # bytes arrived, done, the receiver's exception

    def note(received: int) -> None:
        progress[0] = received
        if not arrived.is_set():
            arrived.set()

    def receive() -> None:
        try:
            if type(sock) is socket.socket and hasattr(socket, "MSG_WAITALL"):
                _receive_waitall(sock, view, got, deadline, note)
            else:  # TLS: no recv flags
                _receive_into(sock, view, got, deadline, note)
        except BaseException as exc:  # raised again in the request's thread
            progress[2] = exc
        finally:
            progress[1] = True
            arrived.set()

    receiver = threading.Thread(target=receive, name="policy-extender-body", daemon=True)
    receiver.start()
    fed = -1  # the count of the last feed that found no work: not fed again until more arrives
    yielded = time.perf_counter()
    try:
        while not progress[1]:
            received = progress[0]
            if received != fed:
                if feed(received):
                    now = time.perf_counter()
                    if now - yielded >= YIELD_SECONDS:
                        time.sleep(0)
                        yielded = time.perf_counter()
                    continue
                fed = received
            arrived.wait()  # set again by each arrival after this clear: none is missed,
            arrived.clear()  # since the count is read again before the next wait
    finally:
        receiver.join()
    if progress[2] is not None:
        raise progress[2]


#: the longest this thread feeds without letting the receiver have the GIL
YIELD_SECONDS = 0.001
#: bytes one ``recv_into(..., MSG_WAITALL)`` of ``_receive_waitall`` waits for
WAITALL_BYTES = 2 << 20
_NO_TIMEOUT = struct.pack("ll", 0, 0)


def _receive_waitall(sock: socket.socket, view: memoryview, got: int, deadline: float | None,
                     progress: Callable[[int], None]) -> None:
    """``_receive_into`` in steps of ``WAITALL_BYTES``, each one ``recv_into`` with
    ``MSG_WAITALL`` on the socket in blocking mode: the kernel copies the bytes in as they
    arrive and the call returns once the step is full, so the receiving thread needs the GIL
    once per step instead of once per packet burst (while the request's thread decodes, each
    time it needs the GIL it waits for the decoder to let go, and meanwhile nothing reads the
    socket). The deadline is the socket's ``SO_RCVTIMEO`` (a wait with nothing arriving ends
    the call with what arrived, or ``EAGAIN``)."""
    previous = sock.gettimeout()
    sock.settimeout(None)
    try:
        while got < len(view):
            if deadline is not None:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise BodyTimeout(got)
                whole = int(remaining)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO,
                                struct.pack("ll", whole, max(1, int((remaining - whole) * 1e6))))
            size = min(WAITALL_BYTES, len(view) - got)
            try:
                received = sock.recv_into(view[got:got + size], size, socket.MSG_WAITALL)
            except (BlockingIOError, TimeoutError):
                raise BodyTimeout(got) from None
            if not received:
                raise BodyEnded(got)
            got += received
            progress(got)
    finally:
        if deadline is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, _NO_TIMEOUT)
        sock.settimeout(previous)


def _receive_into(sock: Any, view: memoryview, got: int, deadline: float | None,
                  progress: Callable[[int], None] | None = None) -> None:
    """Fill ``view`` from ``got`` on; before each ``recv_into`` the socket may wait only until
    ``deadline``, so the bound is on the whole body, not on each gap between packets.
    ``progress(got)`` after each receive."""
    previous = sock.gettimeout()
    try:
        while got < len(view):
            if deadline is not None:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise BodyTimeout(got)
                sock.settimeout(remaining)
            try:
                received = sock.recv_into(view[got:])
            except TimeoutError:
                raise BodyTimeout(got) from None
            if not received:
                raise BodyEnded(got)
            got += received
            if progress is not None:
                progress(got)
    finally:
        if deadline is not None:
            sock.settimeout(previous)
