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
  last chunk; a chunked body over 1 MiB is refused, 413: Volcano sends a Content-Length); or
- the client closed its side: the thread answers what arrived (a 400 for a cut body).

A body over ``WHOLE_BODY_BYTES`` (a snapshot, a large prioritize call) is received apart from its
headers: into a bytearray that grows as it arrives, or, from ``socket_body.MAPPED_FROM`` (32 MiB)
on, into the map the thread would have used (``socket_body.body_buffer``: pages faulted in as the
bytes fill them, a kept map when there is one), and handed to the thread beside the headers
(``conn.body``, which ``socket_body.RECEIVED`` gives the thread's read), so the thread decodes it
without waiting and without a copy. A client that announces a large body, sends part of it and
stalls holds a buffer of what it sent, never a thread. One exception keeps Volcano's snapshot
decoded while it arrives: a mapped body found arriving fast for a whole turn of the event loop
(``receive_into``: 64 MiB or 50 ms in 2 MiB steps, none of which waited 5 ms) goes to a thread
early (``hand_over(early=True)``), which receives the rest while it decodes, under the same
deadline; at most half of a worker's threads (``early_at_most``) take bodies so, and past that a
fast body is received on the event loop like any other. A client that sends fast for a turn and
then stalls holds one of those until ``body_timeout``; calls that arrive whole keep the other
half, and Volcano's large bodies still arrive, only without the overlap. A client waiting for
``100 Continue`` gets it from here. A body over 1 MiB on a path that is no verb, or over ``body_memory``, is
refused (413) without being received.

Only then is the connection queued for a thread, with the bytes received in its parser's buffer,
so the thread parses and answers without waiting for the client. A request not whole within
``body_timeout`` seconds of its first byte (of the accept, for a new connection) is answered 408
by the event loop and its connection closed; a new connection that sent nothing by then is
closed. So connections that have not delivered a whole request hold no thread, and the threads
stay free for the calls that have.

A kept-alive connection that becomes readable (where Volcano's calls come, nearly all whole in
one go) is first given to a thread as gthread does, which takes what has arrived without waiting
(``look``) and answers at once if that is the whole request, else gives the connection to the
event loop to wait for the rest. Receiving every call on the main thread cost about 15 % of
the predicate throughput (16 keep-alive clients, 2 x 8 threads): each of its system calls lets
the other threads have the GIL, and getting it back may take the switch interval. A thread's
look costs nothing gthread did not do.

Two bounds keep what slow clients hold from denying the others:

- memory: the bytes received of the requests not yet whole are counted (``held``); beyond the
  configuration's ``body_memory`` the request that made no progress longest is answered 503 and
  closed (``keep_bound``), so a stalled upload cannot keep a fast one (Volcano's) from arriving;
- connections: a worker has at most gunicorn's ``worker_connections`` connections open (1000 by
  default); when an accept leaves fewer than ``ROOM`` free, the request that has been arriving
  longest is answered 503 and closed, else the connection idle longest (``make_room``), so slow
  clients cannot fill the accept budget and leave Volcano's connections in the listen queue.

Both are counted (``policy_extender_connections_closed_total{bound}``) and logged once a second.

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
from functools import partial
from itertools import islice
from typing import Any

from gunicorn import http
from gunicorn import sock as gunicorn_sock
from gunicorn.http2 import negotiation
from gunicorn.workers.gthread import ThreadWorker

from policy_extender import metrics
from policy_extender.web import http as web_http
from policy_extender.web import socket_body
from policy_extender.web.arrival import Arrival, receive_into

log = logging.getLogger("policy_extender.web")

#: a body of at most this many bytes is received with its headers (predicate bodies: 25-500 KB);
#: a longer one apart from them (``receive_body``), and only on a verb's path
WHOLE_BODY_BYTES = 1 << 20
#: headers longer than this are not waited for: gunicorn's parser refuses them at once (its own
#: limits: a 4094-byte request line, 100 fields of 8190 bytes)
HEADERS_AT_MOST = 1 << 20
#: what the event loop holds in ``data`` of a request whose body is at most ``WHOLE_BODY_BYTES``
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


class WholeRequestWorker(ThreadWorker):
    """gunicorn's gthread worker, with requests received on the event loop until whole (see the
    module's text)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        #: connection -> its request arriving on the event loop (oldest first)
        self.arrivals: dict[Any, Arrival] = {}
        #: the service's ``body_timeout`` (``_NO_LIMIT`` for 0), and verb path -> its body limit
        #: (the app refuses a longer Content-Length without reading it): read once the app loaded
        self.timeout_seconds = _NO_LIMIT
        self.limits: dict[str, int] | None = None  # another WSGI app (tests, benchmarks): any path
        #: verb path -> verb (``Service.routes``): a 408 sent here is counted under its verb
        self.verbs: dict[str, str] = {}
        #: bytes of requests received and not yet handed to a thread, and the bound on them
        #: (configuration ``body_memory``)
        self.held = 0
        self.held_at_most = DEFAULT_BODY_MEMORY
        #: connections whose large body a thread goes on receiving (``hand_over(early=True)``), at
        #: most ``early_at_most``: the other threads never wait for a client
        self.early: set[Any] = set()
        self.early_at_most = max(1, self.cfg.threads // 2)
        #: connections closed to keep the bound (``body_memory``) and the accept budget, since the
        #: last warning (one line a second at most)
        self.evicted = {"memory": 0, "connections": 0}
        self.evicted_logged = 0.0

    def load_wsgi(self) -> None:
        super().load_wsgi()
        service = getattr(self.wsgi, "extensions", {}).get("policy_extender")
        if service is not None:
            if service.config.body_timeout > 0:
                self.timeout_seconds = service.config.body_timeout
            self.limits = {path: service.body_limits[kind] for path, kind in service.routes.items()}
            self.verbs = dict(service.routes)
            self.held_at_most = service.config.body_memory

    def accept(self, listener: Any) -> None:
        """gunicorn's, then, when the worker is near its ``worker_connections``, the connections
        whose request has been arriving longest are closed (``make_room``): slow clients cannot
        fill the accept budget and keep Volcano's connections in the listen queue."""
        super().accept(listener)
        if self.nr_conns >= self.worker_connections - ROOM:
            self.make_room()

    def make_room(self) -> None:
        """Close connections until ``ROOM`` are free: first those whose request is arriving
        (``slowest_arrival``, answered 503), then kept-alive idle ones (idle longest first)."""
        while self.nr_conns > self.worker_connections - ROOM:
            victim = self.slowest_arrival()
            if victim is not None:
                self.evicted["connections"] += 1
                metrics.count_connection_closed("connections")
                self.drop(victim, answer=True, status=503, reason=(
                    f"the worker has {self.nr_conns} connections open (worker_connections "
                    f"{self.worker_connections}) and this request was the slowest to arrive"))
                continue
            if not self.keepalived_conns:
                return
            idle = self.keepalived_conns.popleft()
            try:
                self.poller.unregister(idle.sock)
            except (OSError, KeyError, ValueError):
                pass
            self.evicted["connections"] += 1
            metrics.count_connection_closed("connections")
            self.nr_conns -= 1
            idle.close()

    def slowest_arrival(self) -> Any:
        """Among the ``OLDEST_LOOKED_AT`` requests arriving longest, the one whose bytes last came
        longest ago (a request still arriving fast, such as Volcano's large body, is never it
        while others stall); None when none is arriving."""
        oldest = list(islice(self.arrivals.items(), OLDEST_LOOKED_AT))
        if not oldest:
            return None
        return min(oldest, key=lambda item: item[1].progressed)[0]

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
        self.hold(arrival, arrival.data.__sizeof__())
        conn.sock.setblocking(False)
        self.poller.register(conn.sock, selectors.EVENT_READ, partial(self.on_request_bytes, conn))
        self.on_request_bytes(conn)  # what is there already

    def hold(self, arrival: Arrival, held: int) -> None:
        """``arrival`` now holds ``held`` bytes: counted in the worker's ``held``."""
        self.held += held - arrival.held
        arrival.held = held

    def on_request_bytes(self, conn: Any, _sock: Any = None) -> None:
        """The poller found bytes: take all that is there, then hand over or keep waiting."""
        arrival = self.arrivals.get(conn)
        if arrival is None:
            return
        if arrival.handshake and not self.shake_hands(conn, arrival):
            return
        first = not arrival.data and arrival.body is None
        try:
            if arrival.body is not None:
                closed = receive_into(conn.sock, arrival)
            else:
                closed = receive_available(conn.sock, arrival.data, _receive_cap(arrival.data))
        except OSError:  # reset by the client, a TLS error: nothing to answer
            self.drop(conn, answer=False)
            return
        if first and arrival.data:
            # The request begins with its first byte, not with the connection: Go's transport
            # dials connections it may park unused for a cycle or more (docs/e2e-cluster.md), and
            # a clock from the accept made an onSessionOpen sent on one a second later look late
            # and gave its call's volcano_timeout deadline that second less. A connection that
            # sends nothing is still closed at its deadline from the accept.
            arrival.started = arrival.progressed = time.monotonic()
            arrival.deadline = arrival.started + self.timeout_seconds
        before = arrival.held
        self.hold(arrival, arrival.data.__sizeof__() + arrival.got)  # what ``data`` took, not only used
        if arrival.held > before:
            arrival.progressed = time.monotonic()
        if closed and not arrival.data:
            self.drop(conn, answer=False)
            return
        if arrival.body is not None:
            if closed:  # cut off: the client is gone, there is no one to answer
                self.drop(conn, answer=False)
            elif arrival.got == len(arrival.body):
                self.hand_over(conn)
            elif arrival.fast and len(self.early) < self.early_at_most:
                self.hand_over(conn, early=True)  # decoded while the rest arrives (``EARLY``)
            else:
                self.keep_bound(conn)
            return
        judged: tuple[str, Any] = (WHOLE, 0) if closed else judge(arrival.data, self.limits, self.held_at_most)
        verdict, detail = judged
        if verdict == WAIT:
            self.keep_bound(conn)
            return
        if verdict == REFUSE:
            status, reason = detail
            self.drop(conn, answer=True, status=status, reason=reason)
            return
        if verdict == CONTINUE:  # the client waits for this before it sends the body
            arrival.data = _without_expect(arrival.data)
            _send_now(conn.sock, b"HTTP/1.1 100 Continue\r\n\r\n")
            self.on_request_bytes(conn)  # a body may be there already
            return
        if verdict == BODY:
            self.receive_body(conn, arrival, detail)
            return
        self.hand_over(conn)

    def receive_body(self, conn: Any, arrival: Arrival, length: int) -> None:
        """The headers say a body of ``length`` bytes is coming: bodies of ``MAPPED_FROM`` bytes
        and more are received into their own map (pages as the bytes fill them) from here on,
        shorter ones go on growing ``data``."""
        if length < socket_body.MAPPED_FROM:  # ``_receive_cap`` stops ``data`` at the body's end
            self.keep_bound(conn)
            return
        end = arrival.data.find(_HEADERS_END) + 4
        arrival.body = socket_body.body_buffer(length)
        arrival.got = len(arrival.data) - end
        arrival.body[:arrival.got] = arrival.data[end:]
        del arrival.data[end:]
        self.on_request_bytes(conn)

    def keep_bound(self, conn: Any) -> None:
        """While the bytes of requests not yet whole exceed ``body_memory``, close the one that
        made no progress longest (answered 503); ``conn`` last of all."""
        if self.held <= self.held_at_most:
            return
        stalled = sorted(self.arrivals.items(), key=lambda item: item[1].progressed)
        for victim, arrival in stalled:
            if self.held <= self.held_at_most:
                return
            if victim is conn:
                continue
            self.evicted["memory"] += 1
            metrics.count_connection_closed("memory")
            self.drop(victim, answer=True, status=503, reason=(
                f"request bodies arriving on this worker reached {self.held >> 20} MiB (body_memory "
                f"{self.held_at_most >> 20} MiB) and this one had made no progress for "
                f"{time.monotonic() - arrival.progressed:.1f} s"))
        if self.held > self.held_at_most and conn in self.arrivals:
            self.evicted["memory"] += 1
            metrics.count_connection_closed("memory")
            self.drop(conn, answer=True, status=503, reason=(
                f"request bodies arriving on this worker reached {self.held >> 20} MiB (body_memory "
                f"{self.held_at_most >> 20} MiB)"))

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

    def hand_over(self, conn: Any, early: bool = False) -> None:
        """Queue the connection for a thread, with what arrived in its parser's buffer: the whole
        request, or, for a body over ``WHOLE_BODY_BYTES``, its headers there and the body aside
        (``conn.body``: the thread's read takes it, ``socket_body.RECEIVED``); ``early``: a mapped
        body arriving fast, not whole yet (``conn.body_got`` of it there), which the thread goes
        on receiving while it decodes."""
        arrival = self.arrivals.pop(conn)
        if early:
            self.early.add(conn)
        conn.body_got = arrival.got if early else None
        self.hold(arrival, 0)
        self.poller.unregister(conn.sock)
        data, body = arrival.data, arrival.body
        if body is None:
            end = data.find(_HEADERS_END)
            length = _body_length(data, end) if end >= 0 else None
            if length is not None and length > WHOLE_BODY_BYTES and len(data) >= end + 4 + length:
                body = data[end + 4:end + 4 + length]
                del data[end + 4:]  # no more than the body was received (``_receive_cap``)
        conn.body = body
        conn.parser.unreader.unread(data)
        conn.arrived = arrival.started
        conn.data_ready = True
        super().enqueue_req(conn)

    def finish_request(self, conn: Any, fs: Any) -> None:
        """A thread is done with the connection (main thread): a request it found incomplete
        (``look``) goes to the event loop; then gunicorn's."""
        self.early.discard(conn)
        if not fs.cancelled() and fs.exception() is None and fs.result() is _NOT_WHOLE:
            arrival, conn.waiting = conn.waiting, None
            self.wait_for(conn, arrival)
            return
        super().finish_request(conn, fs)

    def handle(self, conn: Any) -> Any:
        """In the thread: for a kept-alive connection, ``look`` first; then, with when the
        request began to arrive (``web.http.ARRIVAL``: the body deadline counts from there) and
        the body the event loop received (``socket_body.RECEIVED``), gunicorn's."""
        arrived, conn.arrived = getattr(conn, "arrived", None), None  # the next request: anew
        # no name here may hold the body: a map is kept for the next body only when its answer
        # holds the last reference (``socket_body.give_back``)
        socket_body.RECEIVED.body, conn.body = getattr(conn, "body", None), None
        socket_body.RECEIVED.got, conn.body_got = getattr(conn, "body_got", None), None
        if arrived is None and conn.parser is not None:
            arrived = getattr(conn, "readable_at", None) or time.monotonic()
            if not self.look(conn, arrived):
                return _NOT_WHOLE
        web_http.ARRIVAL.started = arrived
        try:
            return super().handle(conn)
        finally:
            web_http.ARRIVAL.started = None
            socket_body.RECEIVED.body = None

    def _keepalive_after(self, conn: Any, keepalive: Any) -> Any:
        """A body the event loop received that the app did not read (a 405, 415 or 413 answered
        without it) is not on the socket: nothing to drain."""
        if getattr(socket_body.RECEIVED, "body", None) is not None:
            socket_body.RECEIVED.body = None
            if socket_body.RECEIVED.got is not None:  # the rest is on the socket, unread: close
                return False
            reader = getattr(getattr(getattr(conn.parser, "mesg", None), "body", None), "reader", None)
            if reader is not None and hasattr(reader, "length"):
                reader.length = 0
        return super()._keepalive_after(conn, keepalive)

    def look(self, conn: Any, started: float) -> bool:
        """In the thread, the bytes of a kept-alive connection's next request that have arrived,
        taken without waiting: True when they are the whole request (left in the parser's buffer
        for gunicorn's ``handle``), or the client closed or reset the connection (``handle`` then
        finds so); False when the rest is for the event loop to wait for (``conn.waiting``)."""
        data = bytearray(conn.parser.unreader.take_buffered())
        conn.sock.setblocking(False)
        try:
            closed = receive_available(conn.sock, data, _receive_cap(data))
        except OSError:
            closed = True
        if closed or judge(data, self.limits, self.held_at_most)[0] == WHOLE:
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
        evicted = {why: count for why, count in self.evicted.items() if count}
        if evicted and now >= self.evicted_logged + 1:  # called after each pass of the event loop
            self.evicted_logged = now
            log.warning("503 to %s", " and ".join(
                f"{count} request(s) to keep within {_BOUNDS[why]}" for why, count in evicted.items()))
            self.evicted = dict.fromkeys(self.evicted, 0)

    def drop(self, conn: Any, answer: bool, status: int = 408, reason: str = "") -> str | None:
        """Close a connection whose request did not arrive (or is refused): a 408 first when
        some of it did (its message returned), or ``status`` with ``reason``."""
        arrival = self.arrivals.pop(conn)
        self.hold(arrival, 0)
        self.poller.unregister(conn.sock)
        message = None
        if answer and arrival.data:
            got = len(arrival.data) + arrival.got
            message = _send_error(conn.sock, arrival.data, got, self.timeout_seconds, status, reason)
            _close_after_answer(conn.sock)
            end = arrival.data.find(_HEADERS_END)
            verb = self.verbs.get(_path(arrival.data)) if end >= 0 else None
            if verb is not None:  # counted as the app counts its answers (the request metrics)
                metrics.note_request(verb, status, time.monotonic() - arrival.started, got - end - 4)
        arrival.body = None
        self.nr_conns -= 1
        conn.close()
        return message


#: connections the worker keeps free under ``worker_connections`` (``make_room``)
ROOM = 16
#: how many of the oldest arriving requests ``slowest_arrival`` compares (bounded: a flood of
#: connections must not make each accept cost a pass over all of them)
OLDEST_LOOKED_AT = 64
#: ``body_memory``'s default (the configuration's)
DEFAULT_BODY_MEMORY = 512 << 20
_BOUNDS = {"memory": "body_memory", "connections": "worker_connections"}


#: what ``judge`` says of a request's bytes so far
WAIT, WHOLE, BODY, CONTINUE, REFUSE = "wait", "whole", "body", "continue", "refuse"


def judge(data: bytearray, limits: dict[str, int] | None, body_memory: int = DEFAULT_BODY_MEMORY) -> tuple[str, Any]:
    """What to do with a request whose bytes so far are ``data``, and a detail:

    - ``WHOLE``: a thread can answer it without waiting for the client: it is whole, or refused
      without its body by the thread (a Content-Length over its verb's limit in ``limits``, by
      path, None for an app that is not the service: the app's 413; one that is not one number, or headers over ``HEADERS_AT_MOST``:
      gunicorn's 400);
    - ``BODY``: the headers announce a body over ``WHOLE_BODY_BYTES`` (the detail: its length)
      that has not all arrived: the event loop receives it (``receive_body``);
    - ``CONTINUE``: the client waits for ``100 Continue`` before it sends the body;
    - ``REFUSE``: answered here without its body (the detail: status and reason): a body over 1
      MiB on a path that is no verb, a chunked one over 1 MiB, one larger than ``body_memory``;
    - ``WAIT``: more is to come."""
    end = data.find(_HEADERS_END)
    if end < 0 or end + 4 > HEADERS_AT_MOST:
        return (WHOLE, 0) if len(data) >= HEADERS_AT_MOST else (WAIT, 0)
    head = bytes(data[:end + 2])
    lengths = _LENGTH.findall(head)
    if len(lengths) > 1 or (lengths and not lengths[0].strip().isdigit()):
        return WHOLE, 0  # refused by gunicorn's parser at once
    length = int(lengths[0].strip()) if lengths else 0
    path = _path(data)
    limit = limits.get(path) if limits is not None else body_memory  # not the service: any path
    if limit is not None and length > limit:
        return WHOLE, 0  # refused by the app at once (413)
    if limit is None and length > WHOLE_BODY_BYTES:
        return REFUSE, (413, f"a body of {length} bytes on {path or 'this path'}, which is no verb: only the "
                             f"verbs take bodies over {WHOLE_BODY_BYTES} bytes")
    if length > body_memory:
        return REFUSE, (413, f"a body of {length} bytes is over body_memory ({body_memory} bytes), what a "
                             "worker holds of the requests it receives: raise body_memory (and the "
                             "pod's memory limit with it), or send less")
    if _EXPECT.search(head):
        return CONTINUE, 0
    body = len(data) - end - 4
    if _CHUNKED.search(head):
        if _chunked_complete(data, end + 4):
            return WHOLE, 0
        if body >= WHOLE_BODY_BYTES:
            return REFUSE, (413, f"a chunked body over {WHOLE_BODY_BYTES} bytes: send bodies that large "
                                 "with a Content-Length, as Volcano does")
        return WAIT, 0
    if body >= length:
        return WHOLE, 0
    return (BODY, length) if length > WHOLE_BODY_BYTES else (WAIT, 0)


def _body_length(data: bytearray, end: int) -> int | None:
    """The Content-Length of headers ending at ``end`` when there is exactly one that is a number."""
    lengths = _LENGTH.findall(bytes(data[:end + 2]))
    if len(lengths) != 1 or not lengths[0].strip().isdigit():
        return None
    return int(lengths[0].strip())


def _receive_cap(data: bytearray) -> int:
    """How many bytes of the request to take into ``data`` at most: up to the end of a body over
    ``WHOLE_BODY_BYTES`` (and not beyond, so that body can be handed over apart from the
    headers), nothing more once the headers announce a body for a map, else ``HELD_AT_MOST``."""
    end = data.find(_HEADERS_END)
    if end < 0:
        return HELD_AT_MOST
    length = _body_length(data, end)
    if length is None or length <= WHOLE_BODY_BYTES:
        return HELD_AT_MOST
    if length >= socket_body.MAPPED_FROM:
        return len(data)  # no more here: the rest goes into the body's map (``receive_body``)
    return end + 4 + length


def _without_expect(data: bytearray) -> bytearray:
    """The request's bytes without its ``Expect: 100-continue`` line (answered here already)."""
    end = data.find(_HEADERS_END)
    return bytearray(_EXPECT.sub(b"", bytes(data[:end + 2]))) + data[end + 2:]


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


def receive_available(sock: Any, data: bytearray, cap: int = HELD_AT_MOST) -> bool:
    """Append to ``data`` what has arrived on the non-blocking ``sock``, up to ``cap`` bytes in
    all; True when the client closed its side. Raises OSError for a reset or a TLS error."""
    try:
        while len(data) < cap:
            chunk = sock.recv(min(RECV_BYTES, cap - len(data)))
            if not chunk:
                return True
            data += chunk
            cap = min(cap, _receive_cap(data))  # the headers may have just told the body's length
            if len(chunk) < RECV_BYTES and not _decrypted_pending(sock):
                break  # all there was (one more recv would only say so)
    except (BlockingIOError, InterruptedError, ssl.SSLWantReadError, ssl.SSLWantWriteError):
        pass
    return False


def _decrypted_pending(sock: Any) -> int:
    """Bytes a TLS socket has decrypted and not handed out yet (the poller cannot see them)."""
    return sock.pending() if isinstance(sock, ssl.SSLSocket) else 0


def _send_now(sock: Any, data: bytes) -> None:
    """Send ``data`` without waiting (an interim answer of a few bytes: the buffer takes it)."""
    try:
        sock.send(data)
    except OSError:  # the client is gone: the next receive finds so
        pass


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


def _send_error(sock: Any, data: bytearray, got: int, timeout: float, status: int = 408, reason: str = "") -> str:
    """The answer to a request the event loop closes (``status``): 408 for one too slow (as the
    app words it, ``web/http.py``), 503 for one closed to keep a bound, 413 for one refused;
    sent without waiting: a socket that will not take it at once is closed without it."""
    end = data.find(_HEADERS_END)
    if status == 408 and end < 0:
        message = (f"request too slow: its headers did not arrive within {timeout:g} s "
                   "(body_timeout); the connection is closed")
    elif status == 408:
        lengths = _LENGTH.findall(bytes(data[:end + 2]))
        length = lengths[0].strip().decode() if len(lengths) == 1 else "the"
        message = (f"request body too slow: {got - end - 4} of {length} bytes arrived "
                   f"within {timeout:g} s (body_timeout); the connection is closed")
    elif status == 503:
        message = (f"request closed before it arrived whole: {reason}; the connection is closed "
                   "(send the request at once: a whole request is never closed so)")
    else:
        message = f"request refused: {reason}; the connection is closed"
    body = json.dumps({"error": message}).encode()
    reasons = {408: "Request Timeout", 413: "Content Too Large", 503: "Service Unavailable"}
    head = (f"HTTP/1.1 {status} {reasons.get(status, 'Error')}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode()
    try:
        sock.send(head + body)
    except OSError:  # the client is gone, or its window is full: closed without the answer
        pass
    return message
