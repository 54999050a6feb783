"""Clients that stall a large body, hoard connections or hold bodies deny no session, under a real
gunicorn of 2 workers x 8 threads (``web/worker.py``).

- 64 clients announce a body over 1 MiB (a 64 MiB prioritize, a 2 MiB one), send part of it and
  stall; 8 send 40 MiB of a 100 MiB one fast, then stall; 2,500 more connections (the hoarders) each send a request's headers a byte every 2 s,
  and each one the server closes is replaced by a new one. Meanwhile three whole sessions of a
  real client run: an onSessionOpen and a prioritize over 1 MiB (the samples' bodies with their
  nodes repeated), 16 parallel predicates, an allocation, 16 predicates again, the close. Every
  answer must equal the answer of the same call before the attack began.
- 600 connections each send 1 MiB of a 2 MiB prioritize body and stall: each worker's RSS stays
  within ``body_memory`` (here 128 MiB) of what it was, the slowest are answered 503, and a
  session meanwhile is right.

On the worker before (a body over 1 MiB went to a thread after its first 64 KiB, at most half the
threads at once; a connection counted against ``worker_connections`` until ``body_timeout``) the
first session's onSessionOpen waited behind the stalled bodies and the hoarders filled both
workers' 1,000 connections: its call timed out.
"""

from __future__ import annotations

import json
import resource
import selectors
import socket
import subprocess
import threading
import time

import pytest

from policy_extender.web.worker import ROOM
from tests.support.bodies import SAMPLES
from tests.support.policies import write_policies
from tests.support.volcano import Server, VolcanoClient, metric_samples


POLICY = {"cap.policy": "filter cap: session.allocated.tasks < 1\n    reason \"cycle full\"\nscore 10 * free_gpu\n"
                        "score snap: 1000 * session.allocated.tasks + 100 * (task.job.min_available ?? 0)\n"}
#: long enough that no stalled client or hoarder is cleared by its deadline while the sessions run
BODY_TIMEOUT = 60.0
BODY_MEMORY_MIB = 128
#: each call's timeout: Volcano's default httpTimeout is 1 s; this machine is shared by several
#: test runs at once, so 5
HTTP_TIMEOUT = 5.0
STALLED = 64
BURSTS = 8
HOARDERS = 2500
#: the attack's bound in time, and in connections the hoarders open in all
ATTACK_SECONDS = 90.0
HOARDER_CONNECTIONS_AT_MOST = 40_000


def sample(verb: str) -> bytes:
    return (SAMPLES / f"{verb}.json").read_bytes()


def large_open() -> bytes:
    """The sample onSessionOpen with each node repeated under new names: over 1 MiB."""
    snapshot = json.loads(sample("onSessionOpen"))
    nodes = dict(snapshot["Nodes"])
    for copy in range(6):
        for name, node in snapshot["Nodes"].items():
            nodes[f"{name}-copy{copy}"] = {**node, "Name": f"{name}-copy{copy}"}
    snapshot["Nodes"] = nodes
    body = json.dumps(snapshot, separators=(",", ":")).encode()
    assert len(body) > 1 << 20, len(body)
    return body


def large_prioritize() -> bytes:
    """The sample prioritize with its nodes repeated under new names: over 1 MiB."""
    call = json.loads(sample("prioritize"))
    nodes = list(call["nodes"])
    for copy in range(70):
        nodes += [{**node, "Name": f"{node['Name']}-copy{copy}"} for node in call["nodes"]]
    call["nodes"] = nodes
    body = json.dumps(call, separators=(",", ":")).encode()
    assert len(body) > 1 << 20, len(body)
    return body


OPEN, PRIORITIZE = large_open(), large_prioritize()


def session(volcano: VolcanoClient) -> list:
    """One session of a real client; the answers in order (a timeout or a non-200 raises)."""
    answers = [volcano.call("onSessionOpen", OPEN, fresh=True)]
    answers.append(volcano.parallel("predicate", [sample("predicate")] * 16))
    answers.append(volcano.call("prioritize", PRIORITIZE))
    answers.append(volcano.call("allocateFunc", sample("allocateFunc")))
    answers.append(volcano.parallel("predicate", [sample("predicate")] * 16))
    answers.append(volcano.call("prioritize", PRIORITIZE, fresh=True))
    answers.append(volcano.call("onSessionClose", sample("onSessionClose"), fresh=True))
    return answers


def head(verb: str, length: int) -> bytes:
    return (f"POST /{verb} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"Content-Length: {length}\r\n\r\n").encode()


class Attack:
    """On one thread: ``stalled`` connections that sent the start of a large body and stall, and
    ``hoarders`` connections that send a request's headers a byte every 2 s, each closed one
    replaced (while ``keep`` is set, within ``HOARDER_CONNECTIONS_AT_MOST``). ``answers``: the
    status line of each connection the server answered before closing it."""

    def __init__(self, port: int, stalled: int, hoarders: int) -> None:
        self.port, self.hoarders = port, hoarders
        self.keep = threading.Event()
        self.keep.set()
        self.selector = selectors.DefaultSelector()
        self.answers: dict[bytes, int] = {}
        self.opened = 0
        self.stalled = [self.stall(n) for n in range(stalled)]
        #: connections that send 40 MiB of a 100 MiB body fast, then stall: each may take one of
        #: the threads that receive a fast large body early (half of each worker's at most)
        self.bursts = [socket.create_connection(("127.0.0.1", port)) for _ in range(BURSTS)]
        self.burst_senders = [threading.Thread(target=self.burst, args=(sock,), daemon=True) for sock in self.bursts]
        for sender in self.burst_senders:
            sender.start()
        self.thread = threading.Thread(target=self.run, name="attack", daemon=True)

    def stall(self, n: int) -> socket.socket:
        sock = socket.create_connection(("127.0.0.1", self.port))
        if n % 2:
            sock.sendall(head("prioritize", 64 << 20) + b'{"task":{' + b" " * (1 << 20))
        else:
            sock.sendall(head("prioritize", 2 << 20) + b'{"task":{' + b" " * (64 << 10))
        return sock

    @staticmethod
    def burst(sock: socket.socket) -> None:
        try:
            sock.sendall(head("prioritize", 100 << 20) + b'{"task":{' + b" " * (40 << 20))
        except OSError:  # closed by the server (body_memory): fine
            pass

    def hoard(self) -> None:
        sock = socket.socket()
        sock.setblocking(False)
        try:
            sock.connect(("127.0.0.1", self.port))
        except BlockingIOError:
            pass
        self.opened += 1
        self.selector.register(sock, selectors.EVENT_READ, [b"POST /predicate HTTP/1.1\r\nX-Slow: " + b"a" * 1000, b""])

    def start(self) -> "Attack":
        for _ in range(self.hoarders):
            self.hoard()
        self.thread.start()
        return self

    def run(self) -> None:
        ends = time.monotonic() + ATTACK_SECONDS
        next_byte = time.monotonic()
        while self.keep.is_set() and time.monotonic() < ends:
            for key, _ in self.selector.select(timeout=max(0.0, min(0.5, next_byte - time.monotonic()))):
                self.read(key)
            if time.monotonic() >= next_byte:
                next_byte = time.monotonic() + 2
                for key in list(self.selector.get_map().values()):
                    rest = key.data[0]
                    try:
                        if rest and key.fileobj.send(rest[:1]):  # type: ignore[union-attr]  # a socket
                            key.data[0] = rest[1:]
                    except OSError:  # not connected yet, or closed: read when readable
                        pass
        for key in list(self.selector.get_map().values()):
            key.fileobj.close()  # type: ignore[union-attr]  # a socket
            self.selector.unregister(key.fileobj)

    def read(self, key) -> None:
        sock = key.fileobj
        try:
            while chunk := sock.recv(65536):
                key.data[1] += chunk
        except BlockingIOError:
            return
        except OSError:
            pass
        status = key.data[1].split(b"\r\n", 1)[0][9:12] or b"closed without an answer"
        self.answers[status] = self.answers.get(status, 0) + 1
        self.selector.unregister(sock)
        sock.close()
        if self.keep.is_set() and self.opened < HOARDER_CONNECTIONS_AT_MOST:
            self.hoard()

    def stop(self) -> None:
        """No more replacements; every connection closed."""
        self.keep.clear()
        self.thread.join(timeout=ATTACK_SECONDS + 10)
        for sock in self.stalled + self.bursts:
            sock.close()
        for sender in self.burst_senders:
            sender.join(timeout=10)


def raise_open_files(at_least: int) -> None:
    """This process's (and so the server's) open-file limit to ``at_least``, within the hard limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < at_least:
        if hard != resource.RLIM_INFINITY and hard < at_least:
            pytest.skip(f"needs {at_least} open files, the hard limit is {hard}")
        resource.setrlimit(resource.RLIMIT_NOFILE, (at_least, hard))


def worker_rss_mib(server: Server) -> dict[int, float]:
    """Each worker's resident set (MiB), by pid."""
    pids = subprocess.run(["ps", "-o", "pid=", "--ppid", str(server.process.pid)], capture_output=True,
                          text=True, check=True).stdout.split()
    rss = {}
    for pid in map(int, pids):
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    rss[pid] = int(line.split()[1]) / 1024
    return rss


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    raise_open_files(HOARDERS + STALLED + 2048)
    tmp = tmp_path_factory.mktemp("stalled-bodies")
    srv = Server(tmp, write_policies(tmp / "policies", POLICY), workers=2, threads=8,
                 extra_args=("--body-timeout", str(BODY_TIMEOUT), "--body-memory", f"{BODY_MEMORY_MIB}MiB"))
    try:
        srv.wait_ready()
        yield srv
    finally:
        srv.stop()


def test_stalled_large_bodies_and_2500_hoarders_leave_every_session_right(server):
    volcano = VolcanoClient(server.port, timeout=HTTP_TIMEOUT, workers=16)
    try:
        reference = session(volcano)  # nothing attacking yet
        assert reference[1][0]["status"] == "" and reference[4][0]["status"].endswith("cycle full"), reference
        attack = Attack(server.port, STALLED, HOARDERS).start()
        try:
            time.sleep(3)  # every hoarder connected and dripping before the sessions start
            failures = []
            for n in range(3):
                started = time.monotonic()
                try:
                    answers = session(volcano)
                except (OSError, AssertionError) as exc:
                    failures.append(f"session {n + 1}: {type(exc).__name__}: {exc}")
                    continue
                if answers != reference:
                    failures.append(f"session {n + 1}: wrong answers")
                print(f"session {n + 1} in {time.monotonic() - started:.2f} s")
            hoarding = len(attack.selector.get_map())
            stalled_open = sum(1 for sock in attack.stalled if _still_open(sock))
        finally:
            attack.stop()
    finally:
        volcano.close()
    print(f"hoarders connected during the sessions: {hoarding}; connections opened in all: {attack.opened}; "
          f"answers: {attack.answers}; stalled uploads still open after: {stalled_open} of {STALLED}")
    assert not failures, failures
    # The sessions ran while the hoarders held the connections the server keeps: each worker closes
    # the slowest arriving request once fewer than ROOM of its worker_connections (gunicorn's 1000)
    # are free, so 2 workers hold at most 2 x (1000 - ROOM) at once, whatever the clients open
    # (more than that counted only while the rest waited in the listen queue: 1940 held of 2500
    # opened on a quiet machine); and every hoarder was opened.
    assert hoarding >= 0.9 * min(HOARDERS, 2 * (1000 - ROOM)) and attack.opened >= HOARDERS, \
        (hoarding, attack.opened)
    # closed to keep the accept budget: answered 503, counted
    assert set(attack.answers) <= {b"503", b"closed without an answer"}, attack.answers
    time.sleep(1)
    closed = metric_samples(server.port).get(
        ("policy_extender_connections_closed_total", (("bound", "connections"),)), 0)
    assert closed >= attack.answers.get(b"503", 0) > 0, (closed, attack.answers)
    assert "Traceback" not in server.log(), server.log()[-3000:]


def test_held_bodies_stay_within_body_memory(server):
    """600 x 1 MiB held: each worker's RSS grows by at most ``body_memory`` (plus slack for the
    allocator), and a session is right meanwhile."""
    volcano = VolcanoClient(server.port, timeout=HTTP_TIMEOUT, workers=16)
    held: list[socket.socket] = []
    try:
        reference = session(volcano)
        before = worker_rss_mib(server)
        for _ in range(600):
            sock = socket.create_connection(("127.0.0.1", server.port))
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
            sock.settimeout(10)
            try:
                sock.sendall(head("prioritize", 2 << 20) + b'{"task":{' + b" " * (1 << 20))
            except OSError:  # closed by the server already (the bound): counted below
                pass
            held.append(sock)
        time.sleep(2)  # all received as far as they go
        during = worker_rss_mib(server)
        assert session(volcano) == reference
        answered: dict[bytes, int] = {}
        for sock in held:  # what each got by now, without waiting
            sock.setblocking(False)
            try:
                status = sock.recv(65536).split(b"\r\n", 1)[0][9:12] or b"closed"
            except BlockingIOError:
                status = b"open"
            except OSError:
                status = b"reset"
            answered[status] = answered.get(status, 0) + 1
    finally:
        volcano.close()
        for sock in held:
            sock.close()
    grown = {pid: during[pid] - before[pid] for pid in before if pid in during}
    print(f"worker RSS before {before} MiB, with 600 x 1 MiB held {during} MiB; connections: {answered}")
    assert all(growth < BODY_MEMORY_MIB + 64 for growth in grown.values()), grown
    # at most body_memory's worth held per worker; the rest answered 503
    assert set(answered) <= {b"503", b"open"} and answered.get(b"open", 0) <= 2 * BODY_MEMORY_MIB, answered


def _still_open(sock: socket.socket) -> bool:
    """Neither answered nor closed by the server."""
    sock.setblocking(False)
    try:
        sock.recv(1, socket.MSG_PEEK)  # an answer, or the server's FIN
        return False
    except BlockingIOError:
        return True
    except OSError:
        return False


def _exchange(port: int, first: bytes, then: bytes = b"", wait_for: bytes | None = None) -> bytes:
    """Send ``first``; once ``wait_for`` arrived (if given), ``then``; all the server answers."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(first)
        answer = b""
        if wait_for is not None:
            while wait_for not in answer:
                answer += sock.recv(65536)
        if then:
            sock.sendall(then)
        sock.shutdown(socket.SHUT_WR)
        while chunk := sock.recv(65536):
            answer += chunk
        return answer


def test_the_event_loop_answers_expect_continue_and_refuses_what_it_will_not_hold(server):
    body = sample("predicate")
    answer = _exchange(server.port, head("predicate", len(body))[:-2] + b"Expect: 100-continue\r\n\r\n", body,
                       wait_for=b"100 Continue\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 "), answer[:200]
    assert answer.count(b"100 Continue") == 1  # not sent again by the thread
    refused = {
        "chunked": (b"POST /predicate HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                    + b"200000\r\n" + b" " * (2 << 20), "a chunked body over 1048576 bytes"),
        "no verb": (head("status", 2 << 20) + b" " * 1000, "which is no verb"),
        "body_memory": (head("onSessionOpen", (BODY_MEMORY_MIB + 1) << 20), "is over body_memory"),
    }
    for what, (request, says) in refused.items():
        answer = _exchange(server.port, request)
        assert answer.startswith(b"HTTP/1.1 413 "), (what, answer[:200])
        assert says in json.loads(answer.split(b"\r\n\r\n", 1)[1])["error"], (what, answer)
