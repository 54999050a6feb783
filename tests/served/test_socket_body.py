"""The body read straight from gunicorn's socket (``web/socket_body.py``), under a real gunicorn
with the service's settings: pinned to the installed gunicorn (the fast path must apply), and
keep-alive intact after bodies of every shape on one connection (large, small, pipelined)."""

from __future__ import annotations

import hashlib
import http.client
import json
import os
import shutil
import socket
import ssl
import subprocess
import sys
import time
from pathlib import Path

import gunicorn
import pytest

from tests.ops.test_image import free_port

ROOT = Path(__file__).resolve().parents[2]


def wait_listening(port: int, process: subprocess.Popen, log) -> None:
    """Until the server accepts connections; fails with its log if it exits or takes 30 s."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            assert process.poll() is None, log()
            time.sleep(0.1)
    process.kill()  # a pipe's log can only be read to its end once the process is gone
    process.wait()
    pytest.fail("server not listening after 30 s:\n" + log())


@pytest.fixture(scope="module")
def server():
    port = free_port()
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    process = subprocess.Popen([sys.executable, "-m", "bench.server", "tests.served.socket_body_app:app",
                                "--bind", f"127.0.0.1:{port}", "--workers", "1", "--threads", "2"],
                               cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    wait_listening(port, process, lambda: process.stderr.read().decode())
    yield port
    process.terminate()
    process.wait(20)


def request(body: bytes) -> bytes:
    return (b"POST /predicate HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n" % len(body)) + body


def read_response(sock: socket.socket, pending: bytearray) -> dict:
    while b"\r\n\r\n" not in pending:
        pending += sock.recv(65536)
    head, _, rest = bytes(pending).partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200"), head
    length = int([line.split(b":")[1] for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")][0])
    while len(rest) < length:
        rest += sock.recv(65536)
    pending[:] = rest[length:]
    assert b"connection: close" not in head.lower()
    return json.loads(rest[:length])


def expect(answer: dict, body: bytes) -> None:
    assert answer["length"] == len(body)
    assert answer["sha256"] == hashlib.sha256(body).hexdigest()
    assert answer["fast"], f"the socket fast path did not apply under gunicorn {gunicorn.__version__}"


def bodies() -> list[bytes]:
    large = b'{"task":{},"node":{"Name":"n","pad":"' + b"x" * (5 << 20) + b'"}}'
    medium = b'{"pad":"' + bytes(range(97, 123)) * 7000 + b'"}'
    return [large, b'{"small":1}', medium, b"{}", large, b'{"a":[1,2,3]}']


def test_bodies_of_every_size_on_one_keep_alive_connection(server):
    with socket.create_connection(("127.0.0.1", server)) as sock:
        pending = bytearray()
        for body in bodies():
            sock.sendall(request(body))
            expect(read_response(sock, pending), body)


def test_a_body_over_the_mapped_size_then_small_ones(server):
    from policy_extender.web.socket_body import MAPPED_FROM
    huge = b'{"pad":"' + b"y" * MAPPED_FROM + b'"}'
    with socket.create_connection(("127.0.0.1", server)) as sock:
        pending = bytearray()
        for body in (huge, b'{"small":2}', huge[:-2] + b'!"}', b"{}"):
            sock.sendall(request(body))
            answer = read_response(sock, pending)
            expect(answer, body)
            assert answer["type"] == ("mmap" if len(body) >= MAPPED_FROM else answer["type"])


def test_pipelined_requests_after_a_body_that_came_with_the_headers(server):
    small, other, large = b'{"first":true}', b'{"second":true}', bodies()[0]
    with socket.create_connection(("127.0.0.1", server)) as sock:
        pending = bytearray()
        sock.sendall(request(small) + request(other))  # the second request sits in gunicorn's buffer
        expect(read_response(sock, pending), small)
        expect(read_response(sock, pending), other)
        sock.sendall(request(large) + request(small))  # the small one follows the large body's last recv
        expect(read_response(sock, pending), large)
        expect(read_response(sock, pending), small)


def test_a_consumer_is_fed_the_body_the_event_loop_received_then_keep_alive_goes_on(server):
    """``read_from_socket(consumer=...)`` under the service's worker: the body, sent in slices with
    pauses, is received by the worker's event loop (``socket_body.RECEIVED``), into a map for a body
    that size; if it arrived fast for a whole turn the thread takes it early and goes on receiving
    it, feeding the consumer with counts that only grow, each after those bytes arrived; else the
    consumer is fed all of it at once. The connection then serves the next."""
    from policy_extender.web.socket_body import MAPPED_FROM
    body = bytes(i % 251 for i in range(MAPPED_FROM + (1 << 20)))
    head = (b"POST /consume HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n" % len(body))
    with socket.create_connection(("127.0.0.1", server)) as sock:
        sock.sendall(head)
        for at in range(0, len(body), 11 << 20):
            sock.sendall(body[at:at + (11 << 20)])
            time.sleep(0.2)
        pending = bytearray()
        answer = read_response(sock, pending)
        expect(answer, body)
        assert answer["type"] == "mmap"
        counts = [count for count, _ in answer["feeds"]]
        assert counts == sorted(set(counts)) and counts[-1] == len(body), answer["feeds"]
        assert all(ok for _, ok in answer["feeds"]), "a feed saw bytes that had not arrived"
        sock.sendall(request(b'{"after":1}'))
        expect(read_response(sock, pending), b'{"after":1}')


def test_a_body_cut_short_closes_the_connection_and_the_next_one_works(server):
    with socket.create_connection(("127.0.0.1", server)) as sock:
        sock.sendall(b"POST /predicate HTTP/1.1\r\nHost: t\r\nContent-Length: 100000\r\n\r\n" + b"x" * 50000)
        sock.shutdown(socket.SHUT_WR)
        sock.settimeout(10)
        while sock.recv(65536):  # no answer the client could mistake for one, then the close
            pass
    with socket.create_connection(("127.0.0.1", server)) as sock:
        pending = bytearray()
        sock.sendall(request(b'{"after":1}'))
        expect(read_response(sock, pending), b'{"after":1}')


# --- the real service: answers through the socket path equal those of the plain read ---------

@pytest.fixture(scope="module")
def service(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("service")
    port = free_port()
    process = subprocess.Popen([sys.executable, "-m", "policy_extender", "serve", "--bind", f"127.0.0.1:{port}",
                                "--workers", "1", "--threads", "2", "--policy-dirs", str(ROOT / "bench" / "policies"),
                                "--session-store", f"sqlite:{tmp / 'sessions.sqlite3'}", "--reload-interval", "0"],
                               cwd=tmp, stdout=subprocess.DEVNULL, stderr=open(tmp / "stderr", "wb"))
    wait_listening(port, process, lambda: (tmp / "stderr").read_text())
    yield port, tmp / "stderr"
    process.terminate()
    process.wait(20)


def service_exchange(sock: socket.socket, pending: bytearray, path: bytes, body: bytes) -> bytes:
    sock.sendall(request(body).replace(b"/predicate", path, 1))
    while b"\r\n\r\n" not in pending:
        pending += sock.recv(65536)
    head, _, rest = bytes(pending).partition(b"\r\n\r\n")
    length = int([line.split(b":")[1] for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")][0])
    while len(rest) < length:
        rest += sock.recv(65536)
    pending[:] = rest[length:]
    return head.split(b" ", 2)[1] + b" " + rest[:length]


def test_service_answers_large_and_small_bodies_on_one_connection_as_the_plain_read_does(service, tmp_path, request):
    from bench.generate import Bodies, Cluster, ClusterSpec
    from policy_extender.config import Config
    from policy_extender.web import create_app

    port, _ = service
    generated = Bodies(Cluster(ClusterSpec(nodes=12, pods_per_node=6)))
    calls = [(b"/prioritize", generated.prioritize())] + [(b"/predicate", generated.predicate(i)) for i in range(6)]
    calls += [(b"/prioritize", generated.prioritize([1, 3, 5])), (b"/predicate", b'{"task":{},"node":null}'),
              (b"/predicate", b'{"task": not json'), (b"/predicate", generated.predicate(7)),
              (b"/preemptable", generated.victims(0, 0)), (b"/reclaimable", generated.victims(1, 1)),
              (b"/jobEnqueueable", generated.job(0)), (b"/jobReady", generated.job(0)),
              (b"/queueOverused", generated.queue()), (b"/allocateFunc", generated.allocate(0, 0, 0))]
    app = create_app(Config(policy_dirs=(str(ROOT / "bench" / "policies"),), reload_interval=0.0,
                            session_store=f"sqlite:{tmp_path / 's.sqlite3'}"))
    request.addfinalizer(app.extensions["policy_extender"].stop)
    client = app.test_client()
    with socket.create_connection(("127.0.0.1", port)) as sock:
        pending = bytearray()
        for path, body in calls:
            got = service_exchange(sock, pending, path, body)
            plain = client.post(path.decode(), data=body, content_type="application/json")
            assert got == str(plain.status_code).encode() + b" " + plain.data, (path, got[:200])


def test_service_decodes_a_large_open_while_it_arrives_to_the_same_session(service, tmp_path, request):
    """An onSessionOpen of 18 MB (decoded while it arrives) leaves the session a predicate sees
    exactly as the same body opened through the whole decoder (the in-process app)."""
    import io

    from bench.generate import Bodies, Cluster, ClusterSpec, write_snapshot
    from policy_extender.config import Config
    from policy_extender.web import create_app

    port, _ = service
    cluster = Cluster(ClusterSpec(nodes=50, pods_per_node=20))
    out = io.BytesIO()
    write_snapshot(cluster, out)
    snapshot_body = out.getvalue()
    from policy_extender.wire.open_stream import STREAM_FROM
    assert len(snapshot_body) > STREAM_FROM
    generated = Bodies(cluster)
    app = create_app(Config(policy_dirs=(str(ROOT / "bench" / "policies"),), reload_interval=0.0,
                            session_store=f"sqlite:{tmp_path / 's.sqlite3'}"))
    request.addfinalizer(app.extensions["policy_extender"].stop)
    client = app.test_client()
    assert client.post("/onSessionOpen", data=snapshot_body, content_type="application/json").status_code == 200
    with socket.create_connection(("127.0.0.1", port)) as sock:
        pending = bytearray()
        assert service_exchange(sock, pending, b"/onSessionOpen", snapshot_body) == b"200 {}"
        for i in range(8):
            body = generated.predicate(i)
            plain = client.post("/predicate", data=body, content_type="application/json")
            assert service_exchange(sock, pending, b"/predicate", body) == b"200 " + plain.data
        broken = snapshot_body[:5_000_000] + b"\x00" + snapshot_body[5_000_001:]
        plain = client.post("/onSessionOpen", data=broken, content_type="application/json")
        assert plain.status_code == 400
        assert service_exchange(sock, pending, b"/onSessionOpen", broken) == b"400 " + plain.data


def test_service_writes_no_gunicorn_access_line_per_call(service):
    port, stderr = service
    with socket.create_connection(("127.0.0.1", port)) as sock:
        assert service_exchange(sock, bytearray(), b"/onSessionClose", b"{}").startswith(b"200")
    time.sleep(0.3)
    assert "gunicorn.access" not in stderr.read_text()


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command to make a certificate")
def test_bodies_over_tls_on_one_keep_alive_connection(tmp_path):
    """gunicorn's socket is then an SSLSocket: recv_into reads decrypted bytes just the same."""
    from tests.served.test_tls import self_signed
    cert, key = self_signed(tmp_path)
    port = free_port()
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    process = subprocess.Popen([sys.executable, "-m", "gunicorn", "-k", "gthread", "--threads", "2", "-w", "1",
                                "--bind", f"127.0.0.1:{port}", "--certfile", str(cert), "--keyfile", str(key),
                                "tests.served.socket_body_app:app"], cwd=ROOT, env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        context = ssl.create_default_context(cafile=str(cert))
        deadline = time.monotonic() + 30
        while True:
            try:
                connection = http.client.HTTPSConnection("127.0.0.1", port, context=context, timeout=10)
                connection.connect()
                break
            except (OSError, ssl.SSLError):
                assert time.monotonic() < deadline and process.poll() is None
                time.sleep(0.1)
        for body in bodies():
            connection.request("POST", "/predicate", body, {"Content-Type": "application/json"})
            response = connection.getresponse()
            assert response.status == 200
            expect(json.loads(response.read()), body)
        connection.close()
    finally:
        process.terminate()
        process.wait(20)


def _pair() -> tuple[socket.socket, socket.socket]:
    left, right = socket.socketpair()
    left.setblocking(True)  # as gunicorn hands the connection to a worker thread
    return left, right


@pytest.mark.skipif(not hasattr(socket, "MSG_DONTWAIT"), reason="no MSG_DONTWAIT here")
def test_a_body_that_has_arrived_is_read_without_touching_the_sockets_timeout(monkeypatch):
    """Everything already there is taken without waiting: the socket's timeout is never
    changed (no ioctl, no poll), and the bytes are the ones sent."""
    from policy_extender.web import socket_body

    changes = []
    real = socket.socket.settimeout
    monkeypatch.setattr(socket.socket, "settimeout", lambda self, t: (changes.append(t), real(self, t))[1])
    reader, writer = _pair()
    try:
        data = os.urandom(100_000)
        writer.sendall(data)
        body = bytearray(len(data))
        seen = []
        with memoryview(body) as view:
            socket_body._receive_into(reader, view, 0, time.monotonic() + 5, seen.append)
        assert bytes(body) == data and seen[-1] == len(data)
        assert changes == [] and reader.gettimeout() is None
    finally:
        reader.close()
        writer.close()


@pytest.mark.skipif(not hasattr(socket, "MSG_DONTWAIT"), reason="no MSG_DONTWAIT here")
def test_the_rest_of_a_body_is_waited_for_under_the_deadline(monkeypatch):
    """Part of the body there, the rest later: both parts land in order and the socket's
    timeout is put back; the rest never coming ends at the deadline (BodyTimeout), and a peer
    that closes early ends the read (BodyEnded), each with the bytes read so far."""
    import threading

    from policy_extender.web import socket_body

    reader, writer = _pair()
    try:
        first, rest = os.urandom(30_000), os.urandom(50_000)
        writer.sendall(first)
        later = threading.Timer(0.2, writer.sendall, (rest,))
        later.start()
        body = bytearray(len(first) + len(rest))
        with memoryview(body) as view:
            socket_body._receive_into(reader, view, 0, time.monotonic() + 5)
        later.join()
        assert bytes(body) == first + rest and reader.gettimeout() is None

        writer.sendall(first)
        started = time.monotonic()
        with memoryview(bytearray(len(first) + 10)) as view, pytest.raises(socket_body.BodyTimeout) as late:
            socket_body._receive_into(reader, view, 0, started + 0.3)
        assert late.value.got == len(first) and 0.25 <= time.monotonic() - started < 3
        assert reader.gettimeout() is None

        writer.sendall(first)
        writer.close()
        with memoryview(bytearray(len(first) + 10)) as view, pytest.raises(socket_body.BodyEnded) as ended:
            socket_body._receive_into(reader, view, 0, time.monotonic() + 5)
        assert type(ended.value) is socket_body.BodyEnded and ended.value.got == len(first)
    finally:
        reader.close()
        writer.close()
