"""HTTP bad-input matrix against a real gunicorn (2 workers): each bad request gets its status and
a JSON error naming the verb and the field path, leaves the session exactly as it was (snapshot,
allocations, pinned policy version: read through /status, through decisions that depend on each,
and from the store file), the workers keep serving (same pids, /healthz), and the server logs no
crash. The fields required of each verb body are listed in docs/reliability.md."""

from __future__ import annotations

import hashlib
import json
import re
import socket
import time

import pytest

from policy_extender.session.sqlite import SqliteStore
from policy_extender.verb_names.volcano import ON_SESSION_CLOSE, VERB_KINDS
from tests.support.bodies import SAMPLES
from tests.support.policies import write_policies
from tests.support.volcano import Server, VolcanoClient

pytestmark = pytest.mark.slow

#: Decisions that show the session: ``cap`` rejects once one task is allocated; ``snap`` scores the
#: allocations and the task's job in the snapshot (its MinAvailable), so a lost or added allocation
#: or a replaced snapshot changes the prioritize answer.
POLICY = {"cap.policy": "filter cap: session.allocated.tasks < 1\n    reason \"cycle full\"\nscore 10 * free_gpu\n"
                        "score snap: 1000 * session.allocated.tasks + 100 * (task.job.min_available ?? 0)\n",
          #: rules that read fields beyond the identity ones and never change an answer above: what
          #: they read is required of every body that carries it (REQUIRED_BY_RULES below)
          "reads.policy": "filter reads: task.requests.gpu >= 0 and task.priority > -10000000000"
                          " and len(task.annotations) >= 0\n"
                          "overused weight: queue.weight > 1000000\n"
                          "victim lower: evictee.priority < evictor.priority\n"}
#: Added after the session opened: the current version differs from the pinned one and scores 7
#: more, so a session closed or re-opened by a bad request shows in the scores.
NEWER = {"newer.policy": "score newer: 7\n"}
#: every verb with a body to get wrong (onSessionClose's is empty), read from the verb table
VERBS = [kind for kind in VERB_KINDS if kind != ON_SESSION_CLOSE]
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


ALL_VERBS = VERBS + ["onSessionClose"]  # onSessionClose's body is {}: any object is well-formed

MATRIX = (
    [(f"malformed JSON {v}", request(v, b'{"task": {'), 400) for v in ALL_VERBS]
    + [(f"not JSON {v}", request(v, b"\xff\xfe garbage"), 400) for v in ALL_VERBS]
    + [(f"top-level list {v}", request(v, b"[]"), 400) for v in ALL_VERBS]
    + [(f"top-level string {v}", request(v, b'"x"'), 400) for v in ALL_VERBS]
    + [(f"top-level number {v}", request(v, b"7"), 400) for v in ALL_VERBS]
    + [(f"top-level null {v}", request(v, b"null"), 400) for v in ALL_VERBS]
    + [(f"empty body {v}", request(v, b""), 400) for v in ALL_VERBS]
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


def edited(verb: str, *path, value=None, remove: bool = False) -> bytes:
    """The sample body of ``verb`` with the value at ``path`` replaced (or removed)."""
    data = json.loads(body(verb))
    target = data
    for key in path[:-1]:  # "*": the first value of a map
        target = next(iter(target.values())) if key == "*" else target[key]
    if remove:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return json.dumps(data).encode()


MISSING = "missing: expected"
#: Bodies that lack, null or mistype a field Volcano always sends and the service keys state or
#: decisions on (docs/reliability.md): (case, verb, body, the error's start).
REQUIRED_FIELDS = [
    ("onSessionOpen Jobs null", "onSessionOpen", edited("onSessionOpen", "Jobs"), "$.Jobs: expected object, got null"),
    ("onSessionOpen Jobs missing", "onSessionOpen", edited("onSessionOpen", "Jobs", remove=True),
     f"$.Jobs: {MISSING} an object"),
    ("onSessionOpen Nodes missing", "onSessionOpen", edited("onSessionOpen", "Nodes", remove=True),
     f"$.Nodes: {MISSING} an object"),
    ("onSessionOpen Nodes a list", "onSessionOpen", edited("onSessionOpen", "Nodes", value=[]),
     "$.Nodes: expected object, got array"),
    ("onSessionOpen Queues null", "onSessionOpen", edited("onSessionOpen", "Queues"), "$.Queues: expected object, got null"),
    ("onSessionOpen Queues missing", "onSessionOpen", edited("onSessionOpen", "Queues", remove=True),
     f"$.Queues: {MISSING} an object"),
    ("onSessionOpen a job without MinAvailable", "onSessionOpen",
     edited("onSessionOpen", "Jobs", "*", "MinAvailable", remove=True), f"$.Jobs[...].MinAvailable: {MISSING} an integer"),
    ("onSessionOpen a job without UID", "onSessionOpen", edited("onSessionOpen", "Jobs", "*", "UID", remove=True),
     f"$.Jobs[...].UID: {MISSING} a non-empty string"),
    ("onSessionOpen a queue with Name null", "onSessionOpen", edited("onSessionOpen", "Queues", "*", "Name"),
     "$.Queues[...].Name: expected string, got null"),
    ("allocateFunc without task.UID", "allocateFunc", edited("allocateFunc", "task", "UID", remove=True),
     f"$.task.UID: {MISSING} a non-empty string"),
    ("allocateFunc task.UID null", "allocateFunc", edited("allocateFunc", "task", "UID"), "$.task.UID: expected string, got null"),
    ("allocateFunc task.UID empty", "allocateFunc", edited("allocateFunc", "task", "UID", value=""),
     "$.task.UID: expected a non-empty string"),
    ("allocateFunc without task.NodeName", "allocateFunc", edited("allocateFunc", "task", "NodeName", remove=True),
     f"$.task.NodeName: {MISSING} a string"),
    ("allocateFunc without task.Job", "allocateFunc", edited("allocateFunc", "task", "Job", remove=True),
     f"$.task.Job: {MISSING} a string"),
    ("deallocateFunc without task.UID", "deallocateFunc", edited("deallocateFunc", "task", "UID", remove=True),
     f"$.task.UID: {MISSING} a non-empty string"),
    ("deallocateFunc task.UID a number", "deallocateFunc", edited("deallocateFunc", "task", "UID", value=7),
     "$.task.UID: expected string, got integer"),
    ("queueOverused without queue.UID", "queueOverused", edited("queueOverused", "queue", "UID", remove=True),
     f"$.queue.UID: {MISSING} a non-empty string"),
    ("queueOverused without queue.Name", "queueOverused", edited("queueOverused", "queue", "Name", remove=True),
     f"$.queue.Name: {MISSING} a non-empty string"),
    ("jobEnqueueable without job.MinAvailable", "jobEnqueueable",
     edited("jobEnqueueable", "job", "MinAvailable", remove=True), f"$.job.MinAvailable: {MISSING} an integer"),
    ("jobEnqueueable without job.Queue", "jobEnqueueable", edited("jobEnqueueable", "job", "Queue", remove=True),
     f"$.job.Queue: {MISSING} a string"),
    ("jobReady without job.MinAvailable", "jobReady", edited("jobReady", "job", "MinAvailable", remove=True),
     f"$.job.MinAvailable: {MISSING} an integer"),
    ("jobReady job.MinAvailable a string", "jobReady", edited("jobReady", "job", "MinAvailable", value="3"),
     "$.job.MinAvailable: expected integer, got string"),
    ("jobEnqueued without job.UID", "jobEnqueued", edited("jobEnqueued", "job", "UID", remove=True),
     f"$.job.UID: {MISSING} a non-empty string"),
    ("predicate without task.UID", "predicate", edited("predicate", "task", "UID", remove=True),
     f"$.task.UID: {MISSING} a non-empty string"),
    ("predicate without node.Name", "predicate", edited("predicate", "node", "Name", remove=True),
     f"$.node.Name: {MISSING} a non-empty string"),
    ("prioritize a node without Name", "prioritize", edited("prioritize", "nodes", 0, "Name", remove=True),
     f"$.nodes[0].Name: {MISSING} a non-empty string"),
    ("preemptable an evictee without UID", "preemptable", edited("preemptable", "evictees", 0, "UID", remove=True),
     f"$.evictees[0].UID: {MISSING} a non-empty string"),
    ("reclaimable evictor without Job", "reclaimable", edited("reclaimable", "evictor", "Job", remove=True),
     f"$.evictor.Job: {MISSING} a string"),
]

#: Fields a loaded rule reads (``reads.policy`` and ``free_gpu``, of the set the session is
#: pinned to) that Volcano always sends: missing, null where Go cannot send null, or of another
#: type, each is a 400 naming its path, as the identity fields are (docs/reliability.md). Before
#: they were required, each of these but the string Weight was decided as if the field were zero
#: or empty (the events were recorded), or refused with a decision.
REQUIRED_BY_RULES = [
    ("predicate without task.Resreq", "predicate", edited("predicate", "task", "Resreq", remove=True),
     f"$.task.Resreq: {MISSING} an object or null"),
    ("prioritize a node without Idle", "prioritize", edited("prioritize", "nodes", 0, "Idle", remove=True),
     f"$.nodes[0].Idle: {MISSING} an object or null"),
    ("queueOverused queue.Weight a string", "queueOverused", edited("queueOverused", "queue", "Weight", value="3"),
     "$.queue.Weight: expected integer, got string"),
    ("allocateFunc task.Priority a string", "allocateFunc", edited("allocateFunc", "task", "Priority", value="high"),
     "$.task.Priority: expected integer, got string"),
    ("deallocateFunc task.Priority a string", "deallocateFunc",
     edited("deallocateFunc", "task", "Priority", value="high"), "$.task.Priority: expected integer, got string"),
    ("allocateFunc task annotations a list", "allocateFunc",
     edited("allocateFunc", "task", "Pod", "metadata", "annotations", value=["a=b"]),
     "$.task.Pod.metadata.annotations: expected object, got array"),
    ("deallocateFunc task annotations a string", "deallocateFunc",
     edited("deallocateFunc", "task", "Pod", "metadata", "annotations", value="a=b"),
     "$.task.Pod.metadata.annotations: expected object, got string"),
    ("predicate without node.Idle", "predicate", edited("predicate", "node", "Idle", remove=True),
     f"$.node.Idle: {MISSING} an object or null"),
    ("preemptable evictor without Priority", "preemptable", edited("preemptable", "evictor", "Priority", remove=True),
     f"$.evictor.Priority: {MISSING} an integer"),
    ("reclaimable evictor without Priority", "reclaimable", edited("reclaimable", "evictor", "Priority", remove=True),
     f"$.evictor.Priority: {MISSING} an integer"),
]
REQUIRED_FIELDS += REQUIRED_BY_RULES

MATRIX += [(case, request(verb, data), 400) for case, verb, data, _ in REQUIRED_FIELDS]
#: the start of each case's error message, past ``"<verb>: "``
ERRORS = {case: error for case, _, _, error in REQUIRED_FIELDS}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("bad-input")
    srv = Server(tmp, write_policies(tmp / "policies", POLICY), f"sqlite:{tmp / 's.sqlite3'}", workers=2, threads=4,
                 extra_args=("--body-timeout", str(BODY_TIMEOUT)), reload_interval=0.2)
    srv.store, srv.policies = SqliteStore(str(tmp / "s.sqlite3")), tmp / "policies"
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


def worker_versions(volcano: VolcanoClient, workers: int = 2) -> dict[int, str]:
    """{pid: the current policy version} of every worker (new connections until both answered)."""
    versions: dict[int, str] = {}
    deadline = time.monotonic() + 10
    while len(versions) < workers and time.monotonic() < deadline:
        status = volcano.get("/status")[1]
        versions[status["pid"]] = status["policy_version"]
    return versions


def session_state(server, volcano: VolcanoClient) -> tuple:
    """The session as /status, the store and two decisions show it: its id and sequence number
    (a new open changes the id, an allocation the sequence), the pinned and the current version,
    the snapshot's bytes and the allocations in the store, the predicate (rejects while one task
    is allocated) and the prioritize scores (allocations, the snapshot's job, the pinned version)."""
    status = volcano.get("/status")[1]
    head = server.store.head()
    stored = None if head is None else (head.session_id, head.seq, head.policy_version,
                                        hashlib.sha256(server.store.snapshot(head.session_id) or b"").hexdigest(),
                                        sorted(server.store.allocations(head.session_id)))
    return (status.get("session"), status.get("policy_version"), stored,
            volcano.call("predicate", body("predicate"), fresh=True),
            volcano.call("prioritize", body("prioritize"), fresh=True))


@pytest.fixture(scope="module")
def before(server, volcano):
    """A session pinned to POLICY with one allocation; then NEWER is added, so the current version
    is another one than the session's."""
    volcano.call("onSessionOpen", body("onSessionOpen"))
    assert volcano.call("allocateFunc", body("allocateFunc")) == {"errorMessage": ""}
    pinned = volcano.get("/status")[1]["session"]["policy_version"]
    write_policies(server.policies, {**POLICY, **NEWER})
    deadline = time.monotonic() + 20
    versions = set(worker_versions(volcano).values())
    while not (len(versions) == 1 and pinned not in versions) and time.monotonic() < deadline:
        time.sleep(0.1)  # both workers on the new version
        versions = set(worker_versions(volcano).values())
    assert len(versions) == 1 and pinned not in versions, (pinned, versions)
    state = session_state(server, volcano)
    scores = set(state[4]["nodeScore"].values())
    assert state[0]["policy_version"] == pinned and state[2] is not None and len(state[2][4]) == 1
    assert state[3]["status"].endswith("cycle full"), state  # one task allocated
    assert all(score % 10 == 0 and score >= 1300 for score in scores), scores  # 1000 x 1 + 100 x 3, no "newer"
    return worker_pids(volcano), state


def verb_of(data: bytes) -> str:
    return data.split(b" ", 2)[1].decode().lstrip("/")


@pytest.mark.parametrize("case,data,status", MATRIX, ids=[m[0] for m in MATRIX])
def test_bad_request_gets_its_status_and_a_json_error(server, volcano, before, case, data, status):
    got, answer = raw_http(server.port, data)
    assert got == status, (case, answer[:300])
    error = json.loads(answer)["error"]
    assert isinstance(error, str)
    if status == 400:  # the body's fault: the verb, where in the body, and what was expected
        assert error.startswith(f"{verb_of(data)}: $"), error
        if case in ERRORS:
            assert error.startswith(f"{verb_of(data)}: {ERRORS[case]}"), error
    assert session_state(server, volcano) == before[1], case


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


def test_an_open_body_that_stalls_mid_way_is_cut_off_and_the_session_stays(server, before, volcano):
    """onSessionOpen is received by a helper thread (MSG_WAITALL steps) and decoded while it
    arrives: 6 MB of a 40 MB snapshot, then nothing: a 408 at the body deadline, the connection
    closed, the session as it was (checked by the survivors test below)."""
    head = request("onSessionOpen", b"", length=40 << 20)
    with socket.create_connection(("127.0.0.1", server.port)) as sock:
        sock.sendall(head + b'{"Jobs":{' + b" " * (6 << 20))
        sock.settimeout(BODY_TIMEOUT + 8)
        answer = _read_until_closed(sock)
    assert answer.startswith(b"HTTP/1.1 408"), answer[:200]
    assert "request body too slow" in json.loads(answer.split(b"\r\n\r\n", 1)[1])["error"]
    assert session_state(server, volcano) == before[1]


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
    assert session_state(server, volcano) == state
    assert state[3]["status"].endswith("cycle full"), state  # the allocation is still counted
    assert not CRASH.findall(server.log()), server.log()[-3000:]
