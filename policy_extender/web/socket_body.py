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
bench.memory.huge_pages``). Off, or where the kernel has them ``never``, 4 KiB pages as before.

A map is kept for the next body of about its size (``give_back``, configuration
``keep_body_maps``, on by default): receiving into memory touched before costs no page fault,
where a fresh map's first touch cost 0.1-1.1 s per 256 MB on a virtual machine whose host takes
back guest memory freed (BENCHMARKS.md, issue 16 item 1). A map is kept only when nothing refers
to it any more: no Python name (its reference count) and no buffer into it (a msgspec ``Raw``
decoded from the body holds a memoryview over it, and ``resize`` refuses while one exists); so
a body that something still reads is never overwritten. Kept, its pages are advised
``MADV_FREE``: the kernel takes them back when memory runs short instead of swapping them, and
until then the next body writes over them without a fault. At most ``KEPT_MAPS`` maps, one per
size (a snapshot's and a large prioritize call's), each resized (``mremap``) to the next body's
length.
"""

from __future__ import annotations

import io
import mmap
import socket
import struct
import sys
import threading
import time
from typing import Any, Callable

from policy_extender import trace

try:  # gunicorn is what serves the service; tests and the fixture runner may run without it
    from gunicorn.http.body import Body, LengthReader
    from gunicorn.http.unreader import SocketUnreader
except ImportError:  # pragma: no cover - the plain read is then the only path
    Body = LengthReader = SocketUnreader = None


#: ``recv`` without waiting (Linux, the BSDs, macOS); 0 where there is none: then every receive waits
_DONTWAIT = getattr(socket, "MSG_DONTWAIT", 0)
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
    if type(reader) is not LengthReader or reader.length != length or stream.buf.tell() != 0:  # type: ignore[union-attr]  # a Body's
        return None
    unreader = reader.unreader  # type: ignore[union-attr]  # a LengthReader's
    if type(unreader) is not SocketUnreader or unreader.sock is not environ.get("gunicorn.socket"):
        return None
    if not isinstance(getattr(unreader, "buf", None), io.BytesIO):
        return None
    return reader


def _buffer(length: int) -> bytearray | mmap.mmap:
    if length < MAPPED_FROM:
        return bytearray(length)
    mapped = _kept_map(length) if _keep_maps else None
    if mapped is not None:
        _counted("kept")
        return mapped
    mapped = mmap.mmap(-1, length, flags=_MAP_FLAGS)
    if _huge_pages and _HUGE is not None:
        try:
            mapped.madvise(_HUGE)
        except OSError:  # a kernel without transparent huge pages: 4 KiB pages
            pass
    _counted("new")
    return mapped


#: the buffer a body of ``length`` bytes is received into (the worker's event loop uses it too)
body_buffer = _buffer
_HUGE = getattr(mmap, "MADV_HUGEPAGE", None)
_FREE = getattr(mmap, "MADV_FREE", None)
_huge_pages = True
_keep_maps = True
#: how many maps a process keeps (``give_back``), and the size ratio within which a kept map
#: serves a body: a snapshot's map the next snapshot, a large prioritize call's the next one
KEPT_MAPS = 2
SIZE_RATIO = 1.25
_kept: list[mmap.mmap] = []  # oldest first
_kept_lock = threading.Lock()
#: ``on_map("new" | "kept")`` for each mapped body (the service counts them in its metrics)
_on_map: Callable[[str], None] | None = None
#: references to a map given back when its caller holds the last one: the caller's name,
#: ``give_back``'s parameter and ``sys.getrefcount``'s own argument
_OWNER_REFS = 3


def configure(huge_pages: bool, keep_maps: bool = True,
              on_map: Callable[[str], None] | None = None) -> None:
    """``huge_pages`` and ``keep_body_maps`` (the configuration's): mapped bodies are
    ``MADV_HUGEPAGE`` or not, and kept for the next body or not; ``on_map`` is told of each
    mapped body. Maps kept until now are let go (they were advised under the old setting)."""
    global _huge_pages, _keep_maps, _on_map
    _huge_pages, _keep_maps, _on_map = bool(huge_pages), bool(keep_maps), on_map
    with _kept_lock:
        dropped = _kept[:]
        _kept.clear()
    del dropped  # unmapped here, outside the lock


def _counted(source: str) -> None:
    trace.note("body_map_kept", 1.0 if source == "kept" else 0.0)
    if _on_map is not None:
        try:
            _on_map(source)
        except Exception:  # a metric must never fail a body read
            pass


def give_back(mapped: Any) -> bool:
    """Keep ``mapped``, a body's map whose answer was sent, for a later body of about its size
    (``_kept_map``); True if kept. The caller must hold it in one name, its last reference:
    when anything else still refers to it (another name, or a buffer such as a msgspec ``Raw``
    value), it is not kept, so it is never written over while something reads it."""
    if not _keep_maps or type(mapped) is not mmap.mmap or mapped.closed:
        return False
    if sys.getrefcount(mapped) > _OWNER_REFS:
        return False
    try:
        mapped.resize(len(mapped))  # refused (BufferError) while a buffer into the map exists
        if _FREE is not None:
            mapped.madvise(_FREE)
    except (BufferError, OSError, ValueError, TypeError):
        return False
    size, dropped = len(mapped), None
    with _kept_lock:
        for i, kept in enumerate(_kept):  # one map per size: the newest of a size is kept
            if _same_size(len(kept), size):
                dropped = _kept.pop(i)
                break
        _kept.append(mapped)
        if len(_kept) > KEPT_MAPS:
            dropped = _kept.pop(0)
    del dropped  # unmapped here, outside the lock
    return True


def _same_size(a: int, b: int) -> bool:
    return max(a, b) <= min(a, b) * SIZE_RATIO


def _kept_map(length: int) -> mmap.mmap | None:
    """A kept map of about ``length`` bytes, resized to it, else None. Taken out of the list
    first, so no other request can be handed it."""
    with _kept_lock:
        sizes = [(abs(len(kept) - length), i) for i, kept in enumerate(_kept) if _same_size(len(kept), length)]
        if not sizes:
            return None
        mapped = _kept.pop(min(sizes)[1])
    if len(mapped) != length:
        try:
            mapped.resize(length)  # mremap: the pages kept stay, a longer body's tail is new
        except (BufferError, OSError, ValueError, TypeError):
            return None
    return mapped


def kept_sizes() -> list[int]:
    """Sizes of the maps kept now, oldest first (tests, benchmarks)."""
    with _kept_lock:
        return [len(kept) for kept in _kept]


#: ``RECEIVED.body``: the body of the request this thread serves when the worker's event loop
#: received it before a thread took the request (``web/worker.py``), else None; ``RECEIVED.got``:
#: None when it is whole, else how much of it arrived (a large body arriving fast, handed over
#: early: the rest is received here, while the consumer decodes)
RECEIVED = threading.local()


def take_received(length: int) -> tuple[bytearray | mmap.mmap, int] | None:
    """The body the event loop received for this thread's request (once) and how many of its
    bytes are there, if it is ``length`` bytes; else None."""
    body = getattr(RECEIVED, "body", None)
    if body is None or len(body) != length:
        return None
    got = getattr(RECEIVED, "got", None)
    RECEIVED.body = RECEIVED.got = None
    return body, length if got is None else got


def _read(reader: Any, length: int, deadline: float | None,
          consumer: Consumer | None = None) -> bytes | bytearray | mmap.mmap:
    received = take_received(length)
    if received is not None:
        body, got = received
        del received  # the map's references: one name (``give_back``)
        if got < length:  # a fast body handed over early: the rest from the socket, as below
            with memoryview(body) as view:
                _receive_rest(reader.unreader.sock, view, got, deadline, consumer, body)
        elif consumer is not None:  # all here already: the consumer works through it
            feed = consumer(body)
            while feed(length):
                pass
        reader.length = 0
        return body
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
        _receive_rest(unreader.sock, view, len(buffered), deadline, consumer, body)
    reader.length = 0
    return body


def _receive_rest(sock: Any, view: memoryview, got: int, deadline: float | None,
                  consumer: Consumer | None, body: Any) -> None:
    """Fill ``view`` (over ``body``) from ``got`` on, feeding ``consumer`` while it arrives."""
    if consumer is None:
        if type(body) is mmap.mmap and type(sock) is socket.socket and hasattr(socket, "MSG_WAITALL"):
            # a large body in 2 MiB steps: 154 ms against 206 for 256 MB (medians of 8,
            # a local sender), as the streamed bodies are received
            _receive_waitall(sock, view, got, deadline)
        else:
            _receive_into(sock, view, got, deadline)
    else:
        _receive_feeding(sock, view, got, deadline, consumer(body))


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
    progress: list[Any] = [got, False, None]  # bytes arrived, done, the receiver's exception

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
    failed, progress[2] = progress[2], None
    if failed is not None:
        # neither the list nor this frame may keep the exception: its traceback holds the frames
        # that refer to both (and to the body's buffer), a reference cycle that would keep an
        # aborted body's memory until a garbage collection (issue 37 item 2)
        try:
            raise failed
        finally:
            del failed


#: the longest this thread feeds without letting the receiver have the GIL
YIELD_SECONDS = 0.001
#: bytes one ``recv_into(..., MSG_WAITALL)`` of ``_receive_waitall`` waits for
WAITALL_BYTES = 2 << 20
_NO_TIMEOUT = struct.pack("ll", 0, 0)


def _receive_waitall(sock: socket.socket, view: memoryview, got: int, deadline: float | None,
                     progress: Callable[[int], None] | None = None) -> None:
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
            if progress is not None:
                progress(got)
    finally:
        if deadline is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, _NO_TIMEOUT)
        sock.settimeout(previous)


def _receive_into(sock: Any, view: memoryview, got: int, deadline: float | None,
                  progress: Callable[[int], None] | None = None) -> None:
    """Fill ``view`` from ``got`` on; before each ``recv_into`` the socket may wait only until
    ``deadline``, so the bound is on the whole body, not on each gap between packets.
    ``progress(got)`` after each receive.

    First what has arrived already is taken without waiting (``MSG_DONTWAIT``, on a plain
    blocking socket, as gunicorn hands it over): a predicate body has usually all arrived, and
    is then read without the timeout's two ``ioctl`` calls and a ``poll`` (3 system calls a call
    less). The deadline bounds only the waits that follow."""
    previous = sock.gettimeout()
    waiting = not (previous is None and _DONTWAIT and type(sock) is socket.socket)
    timed = False  # the socket's timeout set for the deadline: put back at the end
    try:
        while got < len(view):
            if not waiting:
                try:
                    received = sock.recv_into(view[got:], 0, _DONTWAIT)
                except BlockingIOError:  # nothing more yet: wait for the rest, under the deadline
                    waiting = True
                    continue
            else:
                if deadline is not None:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        raise BodyTimeout(got)
                    sock.settimeout(remaining)
                    timed = True
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
        if timed:
            sock.settimeout(previous)
