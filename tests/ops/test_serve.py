"""Metrics through the real service: ``policy-extender serve`` (gunicorn, 2 gthread workers) over
loopback, configured as the image configures it, with the Dockerfile's health check."""

from __future__ import annotations

import http.client
import json
import os
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.support.bodies import SAMPLES
from prometheus_client.parser import text_string_to_metric_families

from tests.ops.test_image import free_port, healthcheck_command

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


def predicate_body() -> bytes:
    return (SAMPLES / "predicate.json").read_bytes()


@pytest.fixture
def service(tmp_path):
    port = free_port()
    env = {**os.environ, "POLICY_EXTENDER_BIND": f"127.0.0.1:{port}", "POLICY_EXTENDER_WORKERS": "2",
           "POLICY_EXTENDER_THREADS": "4", "POLICY_EXTENDER_POLICY_DIRS": str(ROOT / "policies"),
           "POLICY_EXTENDER_SESSION_STORE": f"sqlite:{tmp_path / 'sessions.sqlite'}",
           "POLICY_EXTENDER_LOG_FORMAT": "json", "POLICY_EXTENDER_RELOAD_INTERVAL": "0",
           "PROMETHEUS_MULTIPROC_DIR": str(tmp_path / "metrics")}
    process = subprocess.Popen([sys.executable, "-m", "policy_extender", "serve"], env=env, cwd=tmp_path,
                               stdout=subprocess.DEVNULL, stderr=open(tmp_path / "stderr", "wb"))
    try:
        wait_ready(port, process, tmp_path / "stderr")
        yield port, {**env, "STDERR": str(tmp_path / "stderr")}
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()


def wait_ready(port: int, process: subprocess.Popen, stderr: Path) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        assert process.poll() is None, stderr.read_text()
        try:
            if get(port, "/readyz")[0] == 200:
                return
        except OSError:
            pass
        time.sleep(0.1)
    pytest.fail("service not ready in 30 s:\n" + stderr.read_text())


def get(port: int, path: str) -> tuple[int, bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.request("GET", path)
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def post_many(port: int, body: bytes, count: int) -> list[int]:
    """``count`` predicate calls on one keep-alive connection."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    statuses = []
    for _ in range(count):
        connection.request("POST", "/predicate", body, {"Content-Type": "application/json"})
        response = connection.getresponse()
        response.read()
        statuses.append(response.status)
    connection.close()
    return statuses


def samples(port: int) -> dict:
    status, text = get(port, "/metrics")
    assert status == 200
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text.decode()) for s in family.samples}


def worker_pids(port: int) -> set[int]:
    """Ask /status on fresh connections until both workers have answered."""
    pids: set[int] = set()
    deadline = time.monotonic() + 20
    while len(pids) < 2 and time.monotonic() < deadline:
        pids.add(json.loads(get(port, "/status")[1])["pid"])
    return pids


PREDICATE_200 = ("policy_extender_requests_total", (("code", "200"), ("protocol", "volcano"), ("verb", "predicate")))
RELOAD_OK = ("policy_extender_policy_last_reload_successful", ())


def test_dockerfile_healthcheck_passes_against_the_service(service):
    port, env = service
    subprocess.run(healthcheck_command(), env={**env, "POLICY_EXTENDER_BIND": f"0.0.0.0:{port}"},
                   check=True, timeout=30)


def test_requests_on_every_worker_are_counted_once_and_survive_a_worker_crash(service):
    port, _ = service
    body = predicate_body()
    with ThreadPoolExecutor(8) as pool:
        statuses = [s for batch in pool.map(lambda _: post_many(port, body, 25), range(8)) for s in batch]
    assert statuses == [200] * 200
    assert samples(port)[PREDICATE_200] == 200
    assert samples(port)[RELOAD_OK] == 1

    victim = sorted(worker_pids(port))[0]
    os.kill(victim, signal.SIGKILL)  # gunicorn's child_exit marks it dead and forks a new worker
    deadline = time.monotonic() + 20
    while victim in worker_pids(port) and time.monotonic() < deadline:
        time.sleep(0.2)

    after = samples(port)
    assert after[PREDICATE_200] == 200  # the dead worker's counts are kept
    assert after[RELOAD_OK] == 1        # its gauges are gone, the new worker loaded the policies
    infos = {labels: v for (name, labels), v in after.items() if name == "policy_extender_policy_info"}
    assert list(infos.values()) == [1.0]
    assert not any(f"_{victim}.db" in name and name.startswith("gauge_live")
                   for name in os.listdir(service[1]["PROMETHEUS_MULTIPROC_DIR"]))


def test_json_logs_and_request_ids_through_the_service(service):
    port, env = service
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    connection.request("POST", "/predicate", b"{not json", {"X-Request-Id": "e2e-42"})
    response = connection.getresponse()
    response.read()
    connection.close()
    assert response.getheader("X-Request-Id") == "e2e-42"
    time.sleep(0.5)
    lines = [json.loads(line) for line in Path(env["STDERR"]).read_text().splitlines() if line.strip()]
    assert any(entry.get("request_id") == "e2e-42" for entry in lines)
