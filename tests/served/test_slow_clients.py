"""Slow clients do not starve Volcano's calls (issue 37 item 1), under a real gunicorn of 2 workers
x 8 threads: 64 connections trickle request bodies (1 byte a second, Content-Length 200,000,
each replaced by a new one once the server closed it, so 64 are trickling throughout) while 3
whole sessions of Volcano-shaped calls run (onSessionOpen, 16 parallel predicates, prioritize,
an allocation, 16 predicates again, prioritize, a deallocation, the job and queue verbs,
onSessionClose), each call with Volcano's default ``httpTimeout`` of 1 s. Every answer must come
in time and equal the answer of the same call in a session run before the trickling began; every
trickling client gets a 408 and its connection is closed.

The same over TLS, smaller: clients that connect and never shake hands, or shake hands and
trickle, hold no thread either.

On gunicorn's own gthread worker (before ``web/worker.py``) the trickling connections held all
the threads: every session's first call timed out, and so did the HTTPS predicates."""

from __future__ import annotations

import http.client
import json
import selectors
import shutil
import socket
import ssl
import threading
import time

import pytest

from tests.support.bodies import SAMPLES
from tests.support.policies import write_policies
from tests.served.test_tls import self_signed, wait_ready_https
from tests.support.volcano import Server, VolcanoClient, metric_samples

#: decisions that show the session: ``cap`` rejects once one task is allocated; ``snap`` scores
#: the allocations and the task's job in the snapshot, so an answer decided without the session,
#: or with another, differs from the reference
POLICY = {"cap.policy": "filter cap: session.allocated.tasks < 1\n    reason \"cycle full\"\nscore 10 * free_gpu\n"
                        "score snap: 1000 * session.allocated.tasks + 100 * (task.job.min_available ?? 0)\n"}
#: the service's body deadline here (default 10 s: shorter, so the test is)
BODY_TIMEOUT = 3.0
#: Volcano's default extender.httpTimeout
HTTP_TIMEOUT = 1.0
TRICKLERS = 64
TRICKLE_LENGTH = 200_000
SESSIONS = 3


def sample(verb: str) -> bytes:
    return (SAMPLES / f"{verb}.json").read_bytes()


def session(volcano: VolcanoClient) -> list:
    """One Volcano-shaped session; the answers in order (a timeout or a non-200 raises)."""
    answers = [volcano.call("onSessionOpen", sample("onSessionOpen"), fresh=True)]
    answers.append(volcano.parallel("predicate", [sample("predicate")] * 16))
    answers.append(volcano.call("prioritize", sample("prioritize")))
    answers.append(volcano.call("allocateFunc", sample("allocateFunc")))
    answers.append(volcano.parallel("predicate", [sample("predicate")] * 16))
    answers.append(volcano.call("prioritize", sample("prioritize")))
    answers.append(volcano.call("deallocateFunc", sample("deallocateFunc")))
    answers.append(volcano.parallel_map(lambda verb: volcano.call(verb, sample(verb)),
                                        ["jobEnqueueable", "jobReady", "queueOverused", "preemptable",
                                         "reclaimable"]))
    answers.append(volcano.call("onSessionClose", sample("onSessionClose"), fresh=True))
    return answers


class Tricklers:
    """``count`` connections that each send a request's headers, then its body 1 byte a second,
    on one thread; a connection the server answered and closed is replaced while ``keep`` is
    set. ``answers``: what each answered connection got before the server closed it."""

    def __init__(self, port: int, count: int) -> None:
        self.port, self.count = port, count
        self.keep = threading.Event()
        self.keep.set()
        self.answers: list[bytes] = []
        self.errors: list[str] = []
        self.opened = 0
        self.selector = selectors.DefaultSelector()
        self.thread = threading.Thread(target=self.run, name="tricklers", daemon=True)

    def start(self) -> "Tricklers":
        for _ in range(self.count):
            self.open()
        self.thread.start()
        return self

    def open(self) -> None:
        """A new trickling connection; every other one first has a whole call answered on it, so
        its trickled request arrives on a kept-alive connection (a thread looks at those first)."""
        sock = socket.create_connection(("127.0.0.1", self.port))
        self.opened += 1
        if self.opened % 2 == 0:
            sock.sendall(b"POST /predicate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                         + f"Content-Length: {len(sample('predicate'))}\r\n\r\n".encode() + sample("predicate"))
            answer = b""
            while not answer.endswith(b"}"):  # the JSON answer's end (its only closing brace at the end)
                answer += sock.recv(65536)
            assert answer.startswith(b"HTTP/1.1 200 "), answer[:200]
        sock.sendall(b"POST /predicate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                     + f"Content-Length: {TRICKLE_LENGTH}\r\n\r\n".encode() + b"{")
        sock.setblocking(False)
        self.selector.register(sock, selectors.EVENT_READ, bytearray())

    def run(self) -> None:
        next_byte = time.monotonic() + 1
        while self.selector.get_map():
            for key, _ in self.selector.select(timeout=max(0.0, next_byte - time.monotonic())):
                self.read(key)
            if time.monotonic() >= next_byte:
                next_byte += 1
                for key in list(self.selector.get_map().values()):
                    try:
                        key.fileobj.send(b" ")  # type: ignore[union-attr]  # a socket
                    except BlockingIOError:
                        pass
                    except OSError:  # closed by the server: its answer is read when readable
                        pass

    def read(self, key) -> None:
        sock, answer = key.fileobj, key.data
        try:
            while chunk := sock.recv(65536):
                answer += chunk
        except BlockingIOError:
            return  # more to come
        except OSError as exc:
            self.errors.append(f"{type(exc).__name__} after {bytes(answer[:60])!r}")
        self.selector.unregister(sock)  # closed by the server
        sock.close()
        self.answers.append(bytes(answer))
        if self.keep.is_set():
            self.open()

    def stop(self, wait: float) -> None:
        """No more replacements; until the server answered and closed every one (``wait`` s)."""
        self.keep.clear()
        self.thread.join(timeout=wait)
        for key in list(self.selector.get_map().values()):
            key.fileobj.close()  # type: ignore[union-attr]  # a socket


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("slow-clients")
    srv = Server(tmp, write_policies(tmp / "policies", POLICY), workers=2, threads=8,
                 extra_args=("--body-timeout", str(BODY_TIMEOUT)))
    try:
        srv.wait_ready()
        yield srv
    finally:
        srv.stop()


def test_64_trickling_clients_starve_no_session(server):
    volcano = VolcanoClient(server.port, timeout=HTTP_TIMEOUT, workers=16)
    try:
        reference = session(volcano)  # nothing trickling yet
        assert reference[1][0]["status"] == "" and reference[4][0]["status"].endswith("cycle full"), reference
        tricklers = Tricklers(server.port, TRICKLERS).start()
        try:
            time.sleep(1.5)  # all 64 connected and trickling before the sessions start
            passed, failures = 0, []
            for n in range(SESSIONS):
                try:
                    answers = session(volcano)
                except (OSError, AssertionError) as exc:  # a timeout (Volcano's 1 s) or a non-200
                    failures.append(f"session {n + 1}: {type(exc).__name__}: {exc}")
                    continue
                if answers == reference:
                    passed += 1
                else:
                    failures.append(f"session {n + 1}: wrong answers {answers!r}")
            still_trickling = len(tricklers.selector.get_map())
        finally:
            tricklers.stop(wait=BODY_TIMEOUT + 5)
    finally:
        volcano.close()
    assert passed == SESSIONS, failures
    assert still_trickling == TRICKLERS  # the sessions ran while 64 connections trickled
    # every trickling connection was answered 408 at its deadline, then closed by the server
    assert len(tricklers.answers) >= TRICKLERS and not tricklers.selector.get_map(), len(tricklers.answers)
    assert not tricklers.errors, tricklers.errors[:5]
    for answer in tricklers.answers:
        assert answer.startswith(b"HTTP/1.1 408 "), answer[:200]
        error = json.loads(answer.split(b"\r\n\r\n", 1)[1])["error"]
        assert error.startswith("request body too slow: "), error
        assert f"of {TRICKLE_LENGTH} bytes arrived within {BODY_TIMEOUT:g} s" in error, error
    # counted in the request metrics as the app's own answers are (the flushers write every 0.25 s)
    time.sleep(1)
    counted = metric_samples(server.port).get(
        ("policy_extender_requests_total", (("code", "408"), ("protocol", "volcano"), ("verb", "predicate"))), 0)
    assert counted >= len(tricklers.answers), (counted, len(tricklers.answers))
    assert "Traceback" not in server.log(), server.log()[-3000:]


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command to make a certificate")
def test_over_tls_neither_a_silent_nor_a_trickling_client_holds_a_thread(tmp_path):
    """One worker x 2 threads over HTTPS: 4 clients shake hands and trickle a body, 4 connect and
    send nothing (no handshake); HTTPS predicates are answered meanwhile, within Volcano's 1 s,
    and the trickling clients get a 408 (over TLS) at the body deadline."""
    cert, key = self_signed(tmp_path)
    server = Server(tmp_path, write_policies(tmp_path / "policies", POLICY), workers=1, threads=2,
                    extra_args=("--body-timeout", str(BODY_TIMEOUT), "--certfile", str(cert), "--keyfile", str(key)))
    context = ssl.create_default_context(cafile=str(cert))
    answers: list[bytes] = []

    def trickle() -> None:  # on a thread of its own: the client's handshake waits for the server
        with context.wrap_socket(socket.create_connection(("127.0.0.1", server.port), timeout=BODY_TIMEOUT + 10),
                                 server_hostname="127.0.0.1") as sock:
            sock.sendall(b"POST /predicate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                         + f"Content-Length: {TRICKLE_LENGTH}\r\n\r\n".encode() + b"{")
            answer = b""
            while chunk := sock.recv(65536):
                answer += chunk
            answers.append(answer)

    silent: list[socket.socket] = []
    tricklers = [threading.Thread(target=trickle, daemon=True) for _ in range(4)]
    try:
        wait_ready_https(server, cert)
        for thread in tricklers:
            thread.start()
        silent = [socket.create_connection(("127.0.0.1", server.port)) for _ in range(4)]
        time.sleep(0.5)
        for _ in range(4):
            connection = http.client.HTTPSConnection("127.0.0.1", server.port, context=context, timeout=HTTP_TIMEOUT)
            try:
                connection.request("POST", "/predicate", sample("predicate"), {"Content-Type": "application/json"})
                response = connection.getresponse()
                assert response.status == 200, response.read()[:300]
                assert json.loads(response.read())["status"] == ""
            finally:
                connection.close()
        for thread in tricklers:
            thread.join(timeout=BODY_TIMEOUT + 10)
        assert len(answers) == 4
        for answer in answers:
            assert answer.startswith(b"HTTP/1.1 408 "), answer[:200]
    finally:
        for sock in silent:
            sock.close()
        server.stop()


def test_clients_that_stall_after_a_large_bodys_first_mib_hold_no_thread(server):
    """16 onSessionOpen uploads send 2 MiB of a 300 MiB body and stall: the event loop receives
    them (``web/worker.py``: no thread takes a request before it is whole), so a whole session is
    answered in time and right meanwhile; every stalled upload gets its 408."""
    volcano = VolcanoClient(server.port, timeout=HTTP_TIMEOUT, workers=16)
    stalled: list[socket.socket] = []
    try:
        reference = session(volcano)
        head = (b"POST /onSessionOpen HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                + f"Content-Length: {300 << 20}\r\n\r\n".encode())
        for _ in range(16):
            sock = socket.create_connection(("127.0.0.1", server.port))
            sock.sendall(head + b'{"Jobs":{' + b" " * (2 << 20))
            stalled.append(sock)
        time.sleep(0.5)
        assert session(volcano) == reference
        for sock in stalled:
            sock.settimeout(BODY_TIMEOUT + 10)
            answer = b""
            while chunk := sock.recv(65536):
                answer += chunk
            assert answer.startswith(b"HTTP/1.1 408 "), answer[:200]
    finally:
        volcano.close()
        for sock in stalled:
            sock.close()
