"""HTTP bad-input matrix against a real gunicorn (2 workers): each bad request gets its status and
a JSON error, the workers keep serving (same pids, /healthz), the session state is unchanged, and
the server logs no crash."""

from __future__ import annotations

import json
import re
import socket
import time

import pytest

from tests.web.conftest import SAMPLES, write_policies
from tests.web.volcano import Server, VolcanoClient

pytestmark = pytest.mark.slow

POLICY = {"cap.policy": "filter cap: session.allocated.tasks < 1\n    reason \"cycle full\"\nscore 10 * free_gpu\n"}
VERBS = ["predicate", "prioritize", "preemptable", "reclaimable", "jobEnqueueable", "jobEnqueued",
         "queueOverused", "jobReady", "allocateFunc", "deallocateFunc"]
CRASH = re.compile(r"Traceback|Exception in worker|WORKER TIMEOUT|signal \d+|Segmentation fault|SIGSEGV")

#: the service's body deadline in this module: trickling clients are cut off after it
BODY_TIMEOUT = 2.0


def body(verb: str) -> bytes:
    return (SAMPLES / f"{verb}.json").read_bytes()


def raw_http(port: int, data: bytes, close_after_send: bool = False, timeout: float = 10) -> tuple[int | None, bytes]:
    """Send ``data`` as is; the status and body of the answer (None when the server sent none)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(data)
        if close_after_send:
            sock.shutdown(socket.SHUT_WR)
        chunks = []
        try:
            while chunk := sock.recv(65536):
                chunks.append(chunk)
                if b"\r\n\r\n" in b"".join(chunks) and _complete(b"".join(chunks)):
                    break
        except (ConnectionResetError, socket.timeout):
            pass
    answer = b"".join(chunks)
    if not answer:
        return None, b""
    head, _, rest = answer.partition(b"\r\n\r\n")
    return int(head.split()[1]), rest


def _complete(answer: bytes) -> bool:
    head, _, rest = answer.partition(b"\r\n\r\n")
    found = re.search(rb"content-length:\s*(\d+)", head, re.I)
    return found is not None and len(rest) >= int(found.group(1))


def request(verb: str, payload: bytes, method: str = "POST", content_type: str | None = "application/json",
            length: int | None = None) -> bytes:
    headers = [f"{method} /{verb} HTTP/1.1", "Host: 127.0.0.1", "Connection: close",
               f"Content-Length: {len(payload) if length is None else length}"]
    if content_type is not None:
        headers.append(f"Content-Type: {content_type}")
    return ("\r\n".join(headers) + "\r\n\r\n").encode() + payload


def wrong_field_types() -> list[tuple[str, bytes]]:
    cases = []
    for verb in VERBS:
        top = json.loads(body(verb))
        key = next(iter(top))
        cases.append((verb, json.dumps({**top, key: 42}).encode()))
        cases.append((verb, json.dumps({**top, key: "a string"}).encode()))
    predicate = json.loads(body("predicate"))
    predicate["task"]["Priority"] = "high"
    predicate["node"]["Idle"] = {"MilliCPU": "lots"}
    cases.append(("predicate", json.dumps(predicate).encode()))
    return cases


MATRIX = (
    [(f"malformed JSON {v}", request(v, b'{"task": {'), 400) for v in VERBS]
    + [(f"not JSON {v}", request(v, b"\xff\xfe garbage"), 400) for v in VERBS]
    + [(f"top-level list {v}", request(v, b"[]"), 400) for v in VERBS]
    + [(f"top-level string {v}", request(v, b'"x"'), 400) for v in VERBS]
    + [(f"null objects {v}", request(v, json.dumps(dict.fromkeys(json.loads(body(v)), None)).encode()), 400)
       for v in VERBS]
    + [(f"missing fields {v}", request(v, b"{}"), 400) for v in VERBS]
    + [(f"wrong field type {v} #{i}", request(v, b), 400) for i, (v, b) in enumerate(wrong_field_types())]
    + [("unknown verb", request("noSuchVerb", b"{}"), 404),
       ("GET on a verb", request("predicate", b"", method="GET"), 405),
       ("PUT on a verb", request("predicate", body("predicate"), method="PUT"), 405),
       ("text/plain", request("predicate", body("predicate"), content_type="text/plain"), 415),
       ("form content type", request("predicate", b"a=1", content_type="application/x-www-form-urlencoded"), 415),
       ("oversize announced", request("predicate", b"{}", length=10 * 1024**3), 413)]
)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("bad-input")
    srv = Server(tmp, write_policies(tmp / "policies", POLICY), f"sqlite:{tmp / 's.sqlite3'}", workers=2, threads=4,
                 extra_args=("--body-timeout", str(BODY_TIMEOUT)))
    try:
        srv.wait_ready()
        yield srv
    finally:
        srv.stop()


@pytest.fixture(scope="module")
def volcano(server):
    client = VolcanoClient(server.port, workers=8)
    yield client
    client.close()


def worker_pids(volcano: VolcanoClient, workers: int = 2) -> set[int]:
    pids: set[int] = set()
    deadline = time.monotonic() + 10
    while len(pids) < workers and time.monotonic() < deadline:
        pids.add(volcano.get("/status")[1]["pid"])
    return pids


def session_state(volcano: VolcanoClient) -> tuple:
    status = volcano.get("/status")[1]
    decision = volcano.call("predicate", body("predicate"), fresh=True)
    return status.get("session"), status.get("policy_version"), decision


@pytest.fixture(scope="module")
def before(server, volcano):
    volcano.call("onSessionOpen", body("onSessionOpen"))
    assert volcano.call("allocateFunc", body("allocateFunc")) == {"errorMessage": ""}
    return worker_pids(volcano), session_state(volcano)


@pytest.mark.parametrize("case,data,status", MATRIX, ids=[m[0] for m in MATRIX])
def test_bad_request_gets_its_status_and_a_json_error(server, before, case, data, status):
    got, answer = raw_http(server.port, data)
    assert got == status, (case, answer[:300])
    assert isinstance(json.loads(answer)["error"], str)


def test_a_malformed_content_length_is_refused_by_gunicorn_before_the_app(server, before):
    """gunicorn's own parser answers this one (its HTML 400): the app never sees the request."""
    got, _ = raw_http(server.port, request("predicate", b"{}").replace(b"Content-Length: 2", b"Content-Length: 2x"))
    assert got == 400


def test_truncated_body_then_close(server, before):
    got, answer = raw_http(server.port, request("predicate", body("predicate")[:100], length=5000),
                           close_after_send=True)
    assert got in (400, None), answer[:300]  # the client is gone: an answer, if any, is a 400
    if got is not None:
        assert "Content-Length announced" in json.loads(answer)["error"]


def test_a_slow_body_does_not_hold_the_others(server, before, volcano):
    """8 clients trickle bodies (as many as the service's threads): each is cut off with a 408
    at the body deadline, and other clients are answered meanwhile or right after."""
    slow = [socket.create_connection(("127.0.0.1", server.port)) for _ in range(8)]
    try:
        for sock in slow:
            sock.sendall(request("predicate", b"{", length=len(body("predicate"))))
        time.sleep(1)
        started = time.monotonic()
        assert volcano.call("queueOverused", body("queueOverused"), fresh=True) == {"overused": False}
        assert time.monotonic() - started < BODY_TIMEOUT + 8  # hang guard, not a performance figure
        for sock in slow:
            sock.settimeout(BODY_TIMEOUT + 8)
            answer = _read_until_closed(sock)
            assert answer.startswith(b"HTTP/1.1 408"), answer[:200]
            assert "request body too slow" in json.loads(answer.split(b"\r\n\r\n", 1)[1])["error"]
    finally:
        for sock in slow:
            sock.close()


def test_a_chunked_body_that_stalls_is_cut_off(server, before):
    """A chunked body (no Content-Length) that stops arriving gets a 408 after the idle bound."""
    with socket.create_connection(("127.0.0.1", server.port)) as sock:
        sock.sendall(b"POST /predicate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     b"Transfer-Encoding: chunked\r\n\r\n1\r\n{\r\n")
        sock.settimeout(BODY_TIMEOUT + 8)
        answer = _read_until_closed(sock)
    assert answer.startswith(b"HTTP/1.1 408"), answer[:200]


def _read_until_closed(sock) -> bytes:
    parts = []
    while chunk := sock.recv(65536):
        parts.append(chunk)
    return b"".join(parts)


def test_the_workers_survived_with_the_session_unchanged(server, before, volcano):
    """Runs after the matrix (module order): same pids, healthy, same session, no crash logged."""
    pids, state = before
    assert volcano.get("/healthz")[0] == 200
    assert worker_pids(volcano) == pids
    assert session_state(volcano) == state
    assert state[2]["status"].endswith("cycle full"), state  # the allocation is still counted
    assert not CRASH.findall(server.log()), server.log()[-3000:]
