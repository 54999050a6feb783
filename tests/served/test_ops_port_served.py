"""``ops_bind``: the verbs on one port, everything else on another (``web/ports.py``), under a real
gunicorn: the scheduler's port answers the verbs alone (``/status``, ``/why``, ``/metrics`` ... are
404 there, whatever ``Host`` the client names), the ops port everything but the verbs."""

from __future__ import annotations

import http.client
import json
import time

import pytest

from tests.support.bodies import SAMPLES
from tests.support.policies import write_policies
from tests.support.volcano import Server, free_port


POLICY = {"fit.policy": "filter fit: node.name != \"\"\n    reason \"no name\"\n"}
OPS_ROUTES = ("/healthz", "/readyz", "/status", "/metrics", "/why?task=ns/t")


def ask(port: int, method: str, path: str, body: bytes | None = None, host: str | None = None) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        headers = {"Content-Type": "application/json"}
        if host:
            headers["Host"] = host
        conn.request(method, path, body=body, headers=headers)
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


@pytest.fixture(scope="module")
def ports(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("ops-port")
    ops_port = free_port()
    server = Server(tmp, write_policies(tmp / "policies", POLICY), workers=2, threads=4,
                    extra_args=("--ops-bind", f"127.0.0.1:{ops_port}"))
    try:
        deadline = time.monotonic() + 30
        while True:  # ready: asked on the ops port, where /readyz is
            try:
                if ask(ops_port, "GET", "/readyz")[0] == 200:
                    break
            except OSError:
                pass
            assert server.process.poll() is None and time.monotonic() < deadline, server.log()
            time.sleep(0.1)
        yield server.port, ops_port
    finally:
        server.stop()


def test_the_verb_port_answers_the_verbs_alone(ports):
    verb_port, ops_port = ports
    status, answer = ask(verb_port, "POST", "/predicate", (SAMPLES / "predicate.json").read_bytes())
    assert status == 200, answer
    for path in OPS_ROUTES:
        for host in (None, f"127.0.0.1:{ops_port}"):  # the Host header does not choose the port
            status, answer = ask(verb_port, "GET", path, host=host)
            assert status == 404, (path, status, answer)
            error = json.loads(answer)["error"]
            assert "is not a verb" in error and "ops port (ops_bind)" in error, error
            assert b"runtime_dir" not in answer and b"policy_extender_" not in answer


def test_the_ops_port_answers_all_but_the_verbs(ports):
    verb_port, ops_port = ports
    for path in ("/healthz", "/readyz", "/status", "/metrics"):
        status, answer = ask(ops_port, "GET", path)
        assert status == 200, (path, answer)
    status, answer = ask(ops_port, "GET", "/why?task=ns/t")
    assert status != 404 or b"is a verb" not in answer
    for verb in ("predicate", "onSessionOpen", "prioritize", "kube-scheduler/filter"):
        body = (SAMPLES / "predicate.json").read_bytes()
        status, answer = ask(ops_port, "POST", f"/{verb}", body)
        assert status == 404, (verb, status, answer)
        assert "is a verb: the verbs are served on the scheduler's port" in json.loads(answer)["error"]
    # the verb call on the verb port is counted in the metrics read on the ops port
    time.sleep(0.5)
    metrics = ask(ops_port, "GET", "/metrics")[1].decode()
    assert 'policy_extender_requests_total{code="200",protocol="volcano",verb="predicate"}' in metrics
