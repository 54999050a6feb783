"""The gunicorn worker of ``serve``: gthread, except that a connection gets a thread only once its
request has arrived.

gunicorn's gthread worker hands every readable connection to a thread, which then reads the
request (headers and body) on a blocking socket. A client that sends its request slowly holds
that thread for as long as it takes: with 2 workers x 8 threads, 16 clients trickling bodies at
1 byte/s left no thread for Volcano's calls (issue 37). Here a request is received without
waiting (``recv`` on a non-blocking socket) by the worker's event loop (the main thread, which
already accepts connections and watches the kept-alive ones), whenever the poller says bytes are
there, until

- it is whole: the headers and, after them, ``Content-Length`` bytes (or a chunked body up to its
  last chunk); or
- for a body over ``WHOLE_BODY_BYTES`` (a snapshot, a large prioritize call), its first
  ``STREAM_AFTER_BYTES`` have arrived: a thread then receives the rest into one buffer and
  decodes it as it arrives, as before (``socket_body.py``); or
- its headers ask for ``Expect: 100-continue``: the client sends the body only after an interim
  answer, which gunicorn sends from the thread (Volcano never asks for one); or
- the client closed its side: the thread answers what arrived (a 400 for a cut body).

Only then is the connection queued for a thread, with the bytes received in its parser's buffer,
so the thread parses and answers without waiting for the client. A request not whole within
``body_timeout`` seconds of its first byte (of the accept, for a new connection) is answered 408
by the event loop and its connection closed; a new connection that sent nothing by then is
closed. A body handed over early keeps the same deadline, counted from its first byte
(``web.http.ARRIVAL``), not from when the thread took it. So connections that have not delivered
a whole request hold no thread, and the threads stay free for the calls that have.

A kept-alive connection that becomes readable (where Volcano's calls come, nearly all whole in
one go) is first given to a thread as gthread does, which takes what has arrived without waiting
(``look``) and answers at once if that is the whole request, else gives the connection to the
event loop to wait for the rest. Receiving every call on the main thread cost about 15 % of
the predicate throughput (16 keep-alive clients, 2 x 8 threads): each of its system calls lets
the other threads have the GIL, and getting it back may take the switch interval. A thread's
look costs nothing gthread did not do.

A large body is the one case where a thread waits for the client (a client may send 64 KiB
and stall): at most half the threads of a worker (``receiving_at_most``) serve large bodies at
once; another large body waits, unread, until one of them is done (Volcano sends its
onSessionOpen and prioritize calls one at a time), or is answered 408 at its deadline.

Each waiting connection holds at most ``HELD_AT_MOST`` bytes (2 MiB), and a worker has at most
gunicorn's ``worker_connections`` connections open (1000 by default); past that it stops
accepting until some close (the rest wait in the listen queue).

Over TLS the same: the handshake is done on the event loop too (non-blocking), then the request
is received as above; a connection that negotiated HTTP/2 (ALPN) goes to a thread once its
handshake is done, and one for HTTP/2 with prior knowledge at once (gunicorn's own handling:
both only where gunicorn's HTTP/2 is configured).

Built on gunicorn 27's ``ThreadWorker`` (``enqueue_req``, ``finish_request``, ``murder_pending``,
``TConn``): ``tests/served/test_slow_clients.py`` pins it under a real gunicorn.
"""

from __future__ import annotations

import json
import logging
import re
import selectors
import socket
import ssl
import time
from collections import deque
from functools import partial
from typing import Any

from gunicorn import http
from gunicorn import sock as gunicorn_sock
from gunicorn.http2 import negotiation
from gunicorn.workers.gthread import ThreadWorker

from policy_extender import metrics
from policy_extender.web import http as web_http

log = logging.getLogger("policy_extender.web")

#: a body of at most this many bytes is received whole before a thread takes its request
#: (predicate bodies: 25-500 KB)
WHOLE_BODY_BYTES = 1 << 20
#: a longer body goes to a thread once this much of its request has arrived; the thread receives
#: the rest (an onSessionOpen or a large prioritize decoded while it arrives). Not its first MiB:
#: receiving that on the event loop put 12-18 ms before a 256 MB onSessionOpen's thread started
STREAM_AFTER_BYTES = 64 << 10
#: headers longer than this are not waited for: gunicorn's parser refuses them at once (its own
#: limits: a 4094-byte request line, 100 fields of 8190 bytes)
HEADERS_AT_MOST = 1 << 20
#: what the event loop holds of one request at most: its headers and a whole body
HELD_AT_MOST = HEADERS_AT_MOST + WHOLE_BODY_BYTES
#: bytes one ``recv`` on the event loop takes at most
RECV_BYTES = 256 << 10
#: the end of the headers; a header line naming the body's framing
_HEADERS_END = b"\r\n\r\n"
_LENGTH = re.compile(rb"\r\ncontent-length[ \t]*:[ \t]*([^\r\n]*)", re.I)
_CHUNKED = re.compile(rb"\r\ntransfer-encoding[ \t]*:[^\r\n]*chunked", re.I)
_EXPECT = re.compile(rb"\r\nexpect[ \t]*:[ \t]*100-continue", re.I)
#: seconds a request may take to arrive when ``body_timeout`` is 0 (no limit): gunicorn's
#: keep-alive bound, so a connection that never completes a request is still closed one day
_NO_LIMIT = 120.0
#: what ``handle`` returns for a request it found incomplete: ``finish_request`` gives it to the
#: event loop
_NOT_WHOLE = object()


class Arrival:
    """A request being received on the event loop: the bytes so far and its deadline."""

    __slots__ = ("data", "started", "deadline", "handshake", "queued")

    def __init__(self, data: bytes | bytearray, started: float, deadline: float, handshake: bool = False) -> None:
        self.data = bytearray(data)
        self.started, self.deadline = started, deadline
        #: a new TLS connection whose handshake is not done yet
        self.handshake = handshake
        #: a large body waiting for a thread (``WholeRequestWorker.queued``), off the poller
        self.queued = False


class WholeRequestWorker(ThreadWorker):
    """gunicorn's gthread worker, with requests received on the event loop until whole (see the
    module's text)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        #: connection -> its request arriving on the event loop
        self.arrivals: dict[Any, Arrival] = {}
        #: the service's ``body_timeout`` (``_NO_LIMIT`` for 0), and verb path -> its body limit
        #: (the app refuses a longer Content-Length without reading it): read once the app loaded
        self.timeout_seconds = _NO_LIMIT
        self.limits: dict[str, int] = {}
        #: verb path -> verb (``Service.routes``): a 408 sent here is counted under its verb
        self.verbs: dict[str, str] = {}
        #: connections whose request's large body a thread receives (or received and answers),
        #: at most half the threads: the others stay for the calls that have arrived whole
        self.receiving: set[Any] = set()
        self.receiving_at_most = max(1, self.cfg.threads // 2)
        #: connections whose large body waits for one of those threads (oldest first)
        self.queued: deque[Any] = deque()

    def load_wsgi(self) -> None:
        super().load_wsgi()
        service = getattr(self.wsgi, "extensions", {}).get("policy_extender")
        if service is not None:
            if service.config.body_timeout > 0:
                self.timeout_seconds = service.config.body_timeout
            self.limits = {path: service.body_limits[kind] for path, kind in service.routes.items()}
            self.verbs = dict(service.routes)

    def enqueue_req(self, conn: Any) -> None:
        """Every path to a thread comes here: a new connection, a kept-alive one that became
        readable, read-ahead after an answer, a request the event loop received."""
        if getattr(conn, "arrived", None) is not None:  # received by the event loop: a thread's now
            super().enqueue_req(conn)
            return
        if negotiation.prior_knowledge_allowed(self.cfg, conn.client):
            conn.arrived = time.monotonic()  # the HTTP/2 preface is read in the thread (TConn.init)
            super().enqueue_req(conn)
            return
        if conn.parser is not None:
            # a kept-alive connection with bytes there: a thread takes what has arrived without
            # waiting (``look``) and answers if that is the whole request (Volcano's calls, nearly
            # always), else gives it back to the event loop (``finish_request``). The main thread
            # then does no more than gthread does for it: each of its system calls lets the other
            # threads have the GIL, and it may wait up to the switch interval to get it back
            conn.readable_at = time.monotonic()
            super().enqueue_req(conn)
            return
        conn.sock.setblocking(False)
        handshake = False
        if self.cfg.is_ssl:  # TConn.init's wrap, with the handshake done here (on_request_bytes)
            conn.sock = gunicorn_sock.ssl_context(self.cfg).wrap_socket(
                conn.sock, server_side=True, suppress_ragged_eofs=self.cfg.suppress_ragged_eofs,
                do_handshake_on_connect=False)
            handshake = True
        conn.parser = http.get_parser(self.cfg, conn.sock, conn.client)
        conn.initialized = True  # TConn.init: nothing more to do
        started = time.monotonic()
        self.wait_for(conn, Arrival(b"", started, started + self.timeout_seconds, handshake))

    def wait_for(self, conn: Any, arrival: Arrival) -> None:
        """Receive the connection's request on the event loop (``on_request_bytes``)."""
        self.arrivals[conn] = arrival
        conn.sock.setblocking(False)
        self.poller.register(conn.sock, selectors.EVENT_READ, partial(self.on_request_bytes, conn))
        self.on_request_bytes(conn)  # what is there already

    def on_request_bytes(self, conn: Any, _sock: Any = None) -> None:
        """The poller found bytes: take all that is there, then hand over or keep waiting."""
        arrival = self.arrivals.get(conn)
        if arrival is None:
            return
        if arrival.handshake and not self.shake_hands(conn, arrival):
            return
        try:
            closed = receive_available(conn.sock, arrival.data)
        except OSError:  # reset by the client, a TLS error: nothing to answer
            self.drop(conn, answer=False)
            return
        if closed and not arrival.data:
            self.drop(conn, answer=False)
            return
        verdict = WHOLE if closed else judge(arrival.data, self.limits)  # closed: answer what came
        if verdict == WAIT:
            return
        if verdict == LARGE and len(self.receiving) >= self.receiving_at_most:
            # its bytes wait in the socket's buffer (TCP holds the client back) until a thread
            # that serves a large body is done, or its deadline passes
            self.poller.unregister(conn.sock)
            arrival.queued = True
            self.queued.append(conn)
            return
        self.hand_over(conn, large=verdict == LARGE)

    def shake_hands(self, conn: Any, arrival: Arrival) -> bool:
        """One step of a new TLS connection's handshake; True once it is done (then the request
        is received as over plain TCP), False while it waits for the client (or failed: the
        connection is closed). A connection that negotiated HTTP/2 goes to a thread at once."""
        try:
            conn.sock.do_handshake()
        except ssl.SSLWantReadError:
            self.poller.modify(conn.sock, selectors.EVENT_READ, partial(self.on_request_bytes, conn))
            return False
        except ssl.SSLWantWriteError:  # our part did not fit the socket's buffer: when it does
            self.poller.modify(conn.sock, selectors.EVENT_WRITE, partial(self.on_request_bytes, conn))
            return False
        except OSError:  # not TLS (plain HTTP on this port), a refused certificate, a reset
            self.drop(conn, answer=False)
            return False
        arrival.handshake = False
        self.poller.modify(conn.sock, selectors.EVENT_READ, partial(self.on_request_bytes, conn))
        if gunicorn_sock.is_http2_negotiated(conn.sock):  # TConn.init's HTTP/2 branch
            conn.is_http2 = True
            conn.parser = http.get_parser(self.cfg, conn.sock, conn.client, http2_connection=True)
            conn.parser.initiate_connection()
            self.hand_over(conn)
            return False
        return True

    def hand_over(self, conn: Any, large: bool = False) -> None:
        """Queue the connection for a thread, with what arrived in its parser's buffer."""
        arrival = self.arrivals.pop(conn)
        if not arrival.queued:
            self.poller.unregister(conn.sock)
        if large:
            self.receiving.add(conn)
        conn.parser.unreader.unread(arrival.data)
        conn.arrived = arrival.started
        conn.data_ready = True
        super().enqueue_req(conn)

    def finish_request(self, conn: Any, fs: Any) -> None:
        """A thread is done with the connection (main thread): a request it found incomplete
        (``look``) goes to the event loop; a thread that served a large body lets the next one
        queued have its turn; then gunicorn's."""
        if not fs.cancelled() and fs.exception() is None and fs.result() is _NOT_WHOLE:
            arrival, conn.waiting = conn.waiting, None
            self.wait_for(conn, arrival)
            return
        if conn in self.receiving:
            self.receiving.discard(conn)
            while self.queued and len(self.receiving) < self.receiving_at_most:
                self.hand_over(self.queued.popleft(), large=True)
        super().finish_request(conn, fs)

    def handle(self, conn: Any) -> Any:
        """In the thread: for a kept-alive connection, ``look`` first; then, with when the
        request began to arrive (``web.http.ARRIVAL``: the body deadline counts from there),
        gunicorn's."""
        arrived, conn.arrived = getattr(conn, "arrived", None), None  # the next request: anew
        if arrived is None and conn.parser is not None:
            arrived = getattr(conn, "readable_at", None) or time.monotonic()
            if not self.look(conn, arrived):
                return _NOT_WHOLE
        web_http.ARRIVAL.started = arrived
        try:
            return super().handle(conn)
        finally:
            web_http.ARRIVAL.started = None

    def look(self, conn: Any, started: float) -> bool:
        """In the thread, the bytes of a kept-alive connection's next request that have arrived,
        taken without waiting: True when they are the whole request (left in the parser's buffer
        for gunicorn's ``handle``), or the client closed or reset the connection (``handle`` then
        finds so); False when the rest is for the event loop to wait for (``conn.waiting``)."""
        data = bytearray(conn.parser.unreader.take_buffered())
        conn.sock.setblocking(False)
        try:
            closed = receive_available(conn.sock, data)
        except OSError:
            closed = True
        if closed or judge(data, self.limits) == WHOLE:
            conn.parser.unreader.unread(data)
            return True
        conn.waiting = Arrival(data, started, started + self.timeout_seconds)
        return False

    def murder_pending(self) -> None:
        """gunicorn's (connections deferred by a thread), then the requests past their deadline
        (run by the event loop at least once a second)."""
        super().murder_pending()
        now = time.monotonic()
        late = []
        # in the order they came to the event loop, which is that of their deadlines, except that
        # a request a thread looked at first (``look``) may come a little after younger ones: it
        # is then answered that little late
        for conn, arrival in self.arrivals.items():
            if arrival.deadline > now:
                break
            late.append(conn)
        answered = [self.drop(conn, answer=True) for conn in late]
        answered = [message for message in answered if message]
        if answered:  # one line for all those of this pass (a flood of slow clients: one line a second)
            log.warning("408 to %d request(s) not whole within body_timeout (%g s), their connections "
                        "closed; the first: %s", len(answered), self.timeout_seconds, answered[0])

    def drop(self, conn: Any, answer: bool) -> str | None:
        """Close a connection whose request did not arrive: a 408 first when some of it did
        (its message returned)."""
        arrival = self.arrivals.pop(conn)
        if arrival.queued:
            self.queued.remove(conn)
        else:
            self.poller.unregister(conn.sock)
        message = None
        if answer and arrival.data:
            message = _send_408(conn.sock, arrival.data, self.timeout_seconds)
            _close_after_answer(conn.sock)
            end = arrival.data.find(_HEADERS_END)
            verb = self.verbs.get(_path(arrival.data)) if end >= 0 else None
            if verb is not None:  # counted as the app counts its answers (the request metrics)
                metrics.note_request(verb, 408, time.monotonic() - arrival.started, len(arrival.data) - end - 4)
        self.nr_conns -= 1
        conn.close()
        return message


#: what ``judge`` says of a request's bytes so far
WAIT, WHOLE, LARGE = "wait", "whole", "large"


def judge(data: bytearray, limits: dict[str, int]) -> str:
    """``WHOLE`` when a thread can answer the request whose bytes so far are ``data`` without
    waiting for the client: it is whole, or refused without its body (a Content-Length over its
    verb's limit in ``limits``, by path: a 413; one that is not one number: gunicorn's parser
    answers 400; headers over ``HEADERS_AT_MOST``, which it refuses too). ``LARGE`` when its body is for a thread
    to receive: one over ``WHOLE_BODY_BYTES`` once ``STREAM_AFTER_BYTES`` of the request arrived
    (the thread receives the rest, decoding as it arrives), or the client waits for ``100
    Continue`` (gunicorn sends it from the thread). Else ``WAIT``."""
    end = data.find(_HEADERS_END)
    if end < 0 or end + 4 > HEADERS_AT_MOST:
        return WHOLE if len(data) >= HEADERS_AT_MOST else WAIT
    head = bytes(data[:end + 2])
    lengths = _LENGTH.findall(head)
    if len(lengths) > 1 or (lengths and not lengths[0].strip().isdigit()):
        return WHOLE  # refused by gunicorn's parser at once
    length = int(lengths[0].strip()) if lengths else 0
    if length > limits.get(_path(data), length):
        return WHOLE  # refused by the app at once (413)
    if _EXPECT.search(head):
        return LARGE
    body = len(data) - end - 4
    if _CHUNKED.search(head):
        if _chunked_complete(data, end + 4):
            return WHOLE
        return LARGE if body >= WHOLE_BODY_BYTES else WAIT
    if length > WHOLE_BODY_BYTES:
        return LARGE if len(data) >= STREAM_AFTER_BYTES else WAIT
    return WHOLE if body >= length else WAIT


def _path(data: bytearray) -> str:
    """The path of the request line (without the query), as the dispatch looks verbs up."""
    line = bytes(data[:data.find(b"\r\n")]).split(b" ")
    return line[1].split(b"?", 1)[0].decode("latin-1") if len(line) == 3 else ""


def _chunked_complete(data: bytearray, at: int) -> bool:
    """Whether the chunked body from ``at`` has its last chunk and the empty line after it (or
    a framing error, which the thread's parser answers at once)."""
    while True:
        line_end = data.find(b"\r\n", at)
        if line_end < 0:
            return False
        size_text = bytes(data[at:line_end]).split(b";", 1)[0].strip()
        try:
            size = int(size_text, 16)
        except ValueError:
            return True  # a framing error: the parser refuses it
        if size == 0:  # the last chunk: trailers, then an empty line
            return data.find(b"\r\n\r\n", line_end) >= 0
        at = line_end + 2 + size + 2
        if at > len(data):
            return False


def receive_available(sock: Any, data: bytearray) -> bool:
    """Append to ``data`` what has arrived on the non-blocking ``sock``, up to ``HELD_AT_MOST``
    in all; True when the client closed its side. Raises OSError for a reset or a TLS error."""
    try:
        while len(data) < HELD_AT_MOST:
            chunk = sock.recv(RECV_BYTES)
            if not chunk:
                return True
            data += chunk
            if len(chunk) < RECV_BYTES and not _decrypted_pending(sock):
                break  # all there was (one more recv would only say so)
    except (BlockingIOError, InterruptedError, ssl.SSLWantReadError, ssl.SSLWantWriteError):
        pass
    return False


def _decrypted_pending(sock: Any) -> int:
    """Bytes a TLS socket has decrypted and not handed out yet (the poller cannot see them)."""
    return sock.pending() if isinstance(sock, ssl.SSLSocket) else 0


def _close_after_answer(sock: Any) -> None:
    """The end of our side (FIN after the answer), and the bytes the client sent meanwhile read:
    a socket closed with unread bytes sends a reset, which can cost the client the answer."""
    try:
        sock.shutdown(socket.SHUT_WR)
        for _ in range(16):
            if not sock.recv(RECV_BYTES):
                break
    except OSError:  # nothing more there (EAGAIN), or the client is gone
        pass


def _send_408(sock: Any, data: bytearray, timeout: float) -> str:
    """The 408 the app sends for a body too slow (``web/http.py``), sent without waiting: a
    socket that will not take it at once is closed without it."""
    end = data.find(_HEADERS_END)
    if end < 0:
        message = (f"request too slow: its headers did not arrive within {timeout:g} s "
                   "(body_timeout); the connection is closed")
    else:
        lengths = _LENGTH.findall(bytes(data[:end + 2]))
        length = lengths[0].strip().decode() if len(lengths) == 1 else "the"
        message = (f"request body too slow: {len(data) - end - 4} of {length} bytes arrived "
                   f"within {timeout:g} s (body_timeout); the connection is closed")
    body = json.dumps({"error": message}).encode()
    head = ("HTTP/1.1 408 Request Timeout\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode()
    try:
        sock.send(head + body)
    except OSError:  # the client is gone, or its window is full: closed without the answer
        pass
    return message
