"""A values file (``values.yaml``) is part of the policy set: changing it the kubelet's way (a new
timestamped payload, ``..data`` renamed over) reloads every worker of the real service onto a
new version whose answers use the new values; a wrong value is refused like a broken policy."""

from __future__ import annotations

import time

import pytest

from policy_extender.policyset import compile_sources

from .kubelet import ConfigMapVolume
from .server import Server, sample

pytestmark = pytest.mark.slow

INTERVAL = 0.5
POLICY = "param points: number = 1\nscore s: points\n"


@pytest.fixture
def server_on(tmp_path):
    servers: list[Server] = []

    def start(volume: ConfigMapVolume) -> Server:
        server = Server(volume.root, str(tmp_path), interval=INTERVAL)
        servers.append(server)
        server.wait_listening()
        return server

    yield start
    for server in servers:
        server.stop()


def test_a_changed_value_is_a_new_version_served_by_every_worker(tmp_path, server_on):
    volume = ConfigMapVolume(str(tmp_path / "policies"))
    first = {"a.policy": POLICY, "values.yaml": "a.points: 2\n"}
    volume.update(first)
    server = server_on(volume)
    server.wait_all_on(compile_sources(first).version)
    body = sample("prioritize")
    assert {server.score(body) for _ in range(10)} == {2}

    second = {"a.policy": POLICY, "values.yaml": "a:\n  points: 7\n"}
    assert compile_sources(second).version != compile_sources(first).version
    volume.update(second)
    server.wait_all_on(compile_sources(second).version)
    assert {server.score(body) for _ in range(10)} == {7}

    volume.update({"a.policy": POLICY, "values.yaml": "a.points: seven\n"})  # refused: the last good stays
    time.sleep(INTERVAL * 4)
    assert {server.score(body) for _ in range(10)} == {7}
    _, status = server.get("/status")
    assert status["policy"]["last_reload_ok"] is False
    assert status["policy"]["errors"][0].startswith(
        "values.yaml:1:11: error[E310]: 'a.points' is a number (declared at a.policy:1:7), this is the string 'seven'")

    volume.update({"a.policy": POLICY})  # the values file removed: the default again
    server.wait_all_on(compile_sources({"a.policy": POLICY}).version)
    assert {server.score(body) for _ in range(10)} == {1}


def test_a_values_file_alone_is_an_empty_set(tmp_path):
    from policy_extender.policyset.reload import PolicyReloader
    volume = ConfigMapVolume(str(tmp_path / "policies"))
    volume.update({"values.yaml": "a.points: 2\n"})
    status = PolicyReloader([volume.root], 0, inotify=False).reload_now()
    assert not status.ready
    assert "no policy file (*.policy) in the policy set" in status.errors[0]
