"""An empty policy set (no ``*.policy`` file) is a load error, through the real service: gunicorn
with several workers on loopback, the directory updated the kubelet's way.

A ConfigMap mounted with the wrong key, or a typo in ``policy_dirs``, gives a directory without a
policy file; loaded, it would let every node fit. So the last good set stays, the failed load is
reported (``/status``, ``policy_extender_policy_last_reload_successful 0``), and an instance that
never had a set is not ready, unless ``allow_empty_policy_set`` says the empty set is intended.
"""

from __future__ import annotations

import time

import pytest

from tests.support.volcano import metric_samples

from .kubelet import ConfigMapVolume
from .server import Server, sample

pytestmark = pytest.mark.slow

INTERVAL = 0.5
LAST_OK = ("policy_extender_policy_last_reload_successful", ())


@pytest.fixture
def volume(tmp_path):
    return ConfigMapVolume(str(tmp_path / "policies"))


@pytest.fixture
def start_server(tmp_path, volume):
    servers = []

    def start(*extra_args: str) -> Server:
        server = Server(volume.root, str(tmp_path), workers=2, interval=INTERVAL, extra_args=extra_args)
        servers.append(server)
        server.wait_listening()
        return server

    yield start
    for server in servers:
        server.stop()


def statuses(server: Server, rounds: int = 12) -> list[dict]:
    """/status of the workers, asked on new connections (so from every worker, in practice)."""
    return [server.get("/status")[1] for _ in range(rounds)]


def wait_every_worker_failed(server: Server, timeout: float = 15.0) -> list[dict]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        seen = statuses(server)
        if len({s["pid"] for s in seen}) == server.workers and not any(s["policy"]["last_reload_ok"] for s in seen):
            return seen
        time.sleep(INTERVAL / 2)
    raise TimeoutError(f"not every worker reported the failed load: {statuses(server)}")


def test_a_swap_to_an_empty_directory_keeps_the_last_good_set(volume, language, start_server):
    good = {"a.policy": language.good(1)}
    volume.update(good)
    server = start_server()
    version = language.compile(good).version
    server.wait_all_on(version)
    assert metric_samples(server.port)[LAST_OK] == 1

    volume.update({})  # the kubelet's swap of ..data to a payload without a single key
    seen = wait_every_worker_failed(server)

    assert {s["policy_version"] for s in seen} == {version}
    assert all("no policy file (*.policy) in the policy set" in s["policy"]["errors"][0] for s in seen)
    assert "allow_empty_policy_set: true" in seen[0]["policy"]["errors"][0]
    assert {server.score(sample("prioritize")) for _ in range(10)} == {1}
    assert server.get("/readyz")[0] == 200
    assert metric_samples(server.port)[LAST_OK] == 0
    assert "policy reload failed with 1 error(s), keeping policy set " + version in server.log()

    volume.update(good)  # the next good update recovers by itself
    server.wait_all_on(version)
    deadline = time.monotonic() + 15
    while metric_samples(server.port)[LAST_OK] != 1 and time.monotonic() < deadline:
        time.sleep(INTERVAL / 2)
    assert metric_samples(server.port)[LAST_OK] == 1


def test_an_instance_that_never_had_a_set_is_not_ready_on_an_empty_directory(volume, language, start_server):
    volume.update({"policies.yaml": "a key the policies were not mounted under\n"})
    server = start_server()
    status, body = server.get("/readyz")
    assert status == 503
    assert "no policy file (*.policy) in the policy set" in body["errors"][0]
    good = {"a.policy": language.good(2)}
    volume.update(good)
    server.wait_all_on(language.compile(good).version)
    assert server.get("/readyz")[0] == 200


def test_allow_empty_policy_set_loads_the_empty_set_when_it_is_intended(volume, start_server):
    volume.update({})
    server = start_server("--allow-empty-policy-set", "true")
    status, body = server.get("/readyz")
    assert status == 200, body
    assert all(s["policy"]["last_reload_ok"] and s["policy"]["files"] == [] for s in statuses(server, 6))
    assert metric_samples(server.port)[LAST_OK] == 1
