"""Session gaps and late opens through the real service: ``policy-extender serve`` (gunicorn, 2
workers) over loopback, called the way Volcano's extender plugin calls it."""

from __future__ import annotations

import time

import pytest

from tests.support.bodies import sample
from tests.support.policies import write_policies
from tests.decide.test_session_gaps import SNAPSHOT_POLICIES
from tests.support.volcano import Server, VolcanoClient, metric_samples


@pytest.fixture
def serve(tmp_path):
    servers = []

    def start(*extra_args: str) -> Server:
        policy_dir = write_policies(tmp_path / f"policies-{len(servers)}", SNAPSHOT_POLICIES)
        server = Server(tmp_path, policy_dir, workers=2, threads=4, extra_args=extra_args)
        servers.append(server)
        server.wait_ready()
        return server

    yield start
    for server in servers:
        server.stop()


def test_calls_without_a_session_are_counted_across_workers_and_warned_once_per_worker(serve, tmp_path):
    server = serve()
    client = VolcanoClient(server.port)
    try:
        answers = client.parallel("predicate", [sample("predicate")] * 48, fresh=True)  # both workers
        assert len(answers) == 48
        time.sleep(0.6)  # every worker's flusher has published its counts
        metrics = metric_samples(server.port)
        assert metrics[("policy_extender_calls_without_session_total", (("verb", "predicate"),))] == 48
        published = list((tmp_path / f"metrics-{server.port}").glob("session-gaps-*.json"))
        assert len(published) == 2  # both workers answered some: /status must merge them
        for _ in range(8):  # whichever worker answers /status reports every worker's calls
            status = client.get("/status")[1]
            cycle = status["session_gaps"]["cycles"][0]
            assert cycle["cycle"] == "no session after none"
            assert cycle["no_session"] == {"predicate": 48}
        warnings = [line for line in server.log().splitlines()
                    if "WARNING" in line and "no session after none" in line]
        assert 1 <= len(warnings) <= server.workers, warnings
        assert "raise extender.httpTimeout" in warnings[0]
    finally:
        client.close()


def test_an_open_slower_than_volcano_timeout_is_warned_and_counted(serve):
    late = serve("--volcano-timeout", "0.000001")
    client = VolcanoClient(late.port)
    try:
        client.call("onSessionOpen", sample("onSessionOpen"))
        time.sleep(0.4)
        metrics = metric_samples(late.port)
        assert metrics[("policy_extender_session_open_late_total", ())] == 1
        lines = [line for line in late.log().splitlines() if "longer than volcano_timeout" in line]
        assert len(lines) == 1 and "WARNING" in lines[0] and "Raise extender.httpTimeout" in lines[0]
    finally:
        client.close()


def test_an_open_within_volcano_timeout_is_not_warned(serve):
    server = serve()  # volcano_timeout 1 s; the sample snapshot is stored in milliseconds
    client = VolcanoClient(server.port)
    try:
        client.call("onSessionOpen", sample("onSessionOpen"))
        time.sleep(0.4)
        assert metric_samples(server.port)[("policy_extender_session_open_late_total", ())] == 0
        assert "longer than volcano_timeout" not in server.log()
    finally:
        client.close()


def test_an_open_on_a_connection_parked_before_it_is_timed_from_its_first_byte(serve):
    """Go's transport dials connections it may park unused for a cycle: on the real cluster
    (docs/e2e-cluster.md) onSessionOpen, sent on such a connection a second after it was dialled,
    was warned "took 1.05 s ... Volcano gave up on it" 10 to 72 times a trace while Volcano had its
    answer in milliseconds, because the clock started at the accept. It starts at the first byte."""
    import socket

    server = serve()  # volcano_timeout 1 s
    body = sample("onSessionOpen")
    with socket.create_connection(("127.0.0.1", server.port)) as sock:
        time.sleep(1.4)  # parked longer than volcano_timeout before its first request
        sock.sendall(b"POST /onSessionOpen HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     b"Content-Length: %d\r\n\r\n" % len(body) + body)
        assert sock.recv(4096).startswith(b"HTTP/1.1 200")
    time.sleep(0.4)
    assert metric_samples(server.port)[("policy_extender_session_open_late_total", ())] == 0
    assert "longer than volcano_timeout" not in server.log()
