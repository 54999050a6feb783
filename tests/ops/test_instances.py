"""Several ``policy-extender serve`` instances on one host (real gunicorn, real HTTP): each keeps
its own session store and metrics, an explicit SQLite file has one owner, and the private runtime
directory goes with its master. The cycle driver and the method are in ``tests/ops/instances.py``."""

from __future__ import annotations

import http.client
import os
import signal
import stat
import subprocess
import time
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.ops.instances import cluster, run_concurrently, start_two
from tests.support.policies import write_policies
from tests.served.test_e2e import POLICIES
from tests.support.volcano import Server, VolcanoClient

pytestmark = pytest.mark.slow


@pytest.fixture
def two(tmp_path):
    servers = start_two(tmp_path)
    yield servers
    for server in servers:
        server.stop()


def status(server: Server) -> dict:
    return VolcanoClient(server.port).get("/status")[1]


def predicates_counted(server: Server) -> float:
    """``policy_extender_requests_total{verb="predicate",code="200"}`` on the server's /metrics."""
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    try:
        conn.request("GET", "/metrics")
        text = conn.getresponse().read().decode()
    finally:
        conn.close()
    return sum(s.value for family in text_string_to_metric_families(text)
               for s in family.samples if s.name == "policy_extender_requests_total"
               and s.labels == {"verb": "predicate", "protocol": "volcano", "code": "200"})


def wait_exit(process: subprocess.Popen, timeout: float = 30) -> int:
    return process.wait(timeout=timeout)


def test_two_instances_with_default_settings_keep_their_own_sessions_and_metrics(two):
    a, b = two
    client_a, client_b = VolcanoClient(a.port), VolcanoClient(b.port)
    try:
        client_a.call("onSessionOpen", cluster(variant=False).open_body)
        assert status(b)["session"] is None, "B shows a session it never opened"
        session_a = status(a)["session"]
        client_b.call("onSessionOpen", cluster(variant=True).open_body)
        assert status(a)["session"] == session_a, "B's open replaced A's session"
        assert status(b)["session"]["id"] != session_a["id"]
        client_a.call("onSessionClose", {})
        assert status(b)["session"] is not None, "A's close closed B's session"
        client_b.call("onSessionClose", {})
    finally:
        client_a.close()
        client_b.close()

    tally_a, tally_b = run_concurrently((a, b), cycles=3)
    assert tally_a.wrong == [] and tally_b.wrong == []
    assert tally_a.figures()["calls"] > 400 and tally_b.figures()["calls"] > 400
    # each instance's /metrics counts its own calls only (one directory each, none wiped)
    assert predicates_counted(a) == tally_a.calls["predicate"]
    assert predicates_counted(b) == tally_b.calls["predicate"]


def test_the_private_runtime_directory_is_made_per_instance_and_removed_at_exit(two):
    a, b = two
    dirs = [status(server)["runtime_dir"] for server in (a, b)]
    assert dirs[0] != dirs[1]
    for directory in dirs:
        assert os.path.dirname(directory) == "/dev/shm"
        assert stat.S_IMODE(os.stat(directory).st_mode) == 0o700
        assert {"owner", "metrics", "last-good.json"} <= set(os.listdir(directory))
    VolcanoClient(a.port).call("onSessionOpen", cluster(variant=False).open_body)
    assert "sessions.sqlite3" in os.listdir(dirs[0])
    a.process.send_signal(signal.SIGTERM)
    b.process.send_signal(signal.SIGINT)
    assert wait_exit(a.process) == 0 and wait_exit(b.process) == 0
    assert not os.path.exists(dirs[0]) and not os.path.exists(dirs[1])


def test_a_second_instance_on_the_same_sqlite_file_refuses_to_start(tmp_path):
    policy_dir = write_policies(tmp_path / "policies", POLICIES)
    store = tmp_path / "shared.sqlite3"
    first = Server(tmp_path, policy_dir, f"sqlite:{store}", workers=2)
    second = None
    try:
        first.wait_ready()
        VolcanoClient(first.port).call("onSessionOpen", cluster(variant=False).open_body)
        session = status(first)["session"]
        second = Server(tmp_path, policy_dir, f"sqlite:{store}", workers=2)
        assert wait_exit(second.process) != 0
        log = second.log()
        assert f"the session store {store} is in use by another process (pid {first.process.pid}, started at " in log
        assert "Listening at" not in log  # refused before gunicorn bound its port
        assert status(first)["session"] == session  # the first one never noticed
    finally:
        first.stop()
        if second is not None:
            second.stop()
    third = Server(tmp_path, policy_dir, f"sqlite:{store}", workers=2)  # the owner is gone: taken over
    try:
        third.wait_ready()
    finally:
        third.stop()


def test_a_master_killed_with_sigkill_is_taken_over_and_its_directory_swept(tmp_path):
    policy_dir = write_policies(tmp_path / "policies", POLICIES)
    store = f"sqlite:{tmp_path / 'shared.sqlite3'}"
    first = Server(tmp_path, policy_dir, store, workers=2)
    first.wait_ready()
    runtime_dir = status(first)["runtime_dir"]
    workers = children(first.process.pid)
    first.process.kill()  # no on_exit, no cleanup: the directory stays and the workers linger
    first.stop()
    deadline = time.monotonic() + 60  # gunicorn workers notice their master is gone and exit
    while any(os.path.exists(f"/proc/{pid}") and not zombie(pid) for pid in workers) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert os.path.isdir(runtime_dir)
    second = Server(tmp_path, policy_dir, store, workers=2)
    try:
        second.wait_ready()
        assert not os.path.exists(runtime_dir), "the dead instance's runtime directory was not swept"
        assert "taking over from an owner that is gone" in second.log()
    finally:
        second.stop()


def children(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                found.append(int(entry))
    return found


def zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True
