"""Hot reload through the real service: gunicorn with several workers on loopback.

Versions are told apart by their decisions: version N scores every node N. Every update is made
the kubelet's way (new timestamped directory, ``..data`` renamed over, old directory deleted).
"""

from __future__ import annotations

import http.client
import json
import os
import signal
import threading
import time
from collections import Counter

import pytest

from .kubelet import ConfigMapVolume
from .server import Server, sample

pytestmark = pytest.mark.slow

INTERVAL = 0.5


@pytest.fixture
def volume(tmp_path):
    return ConfigMapVolume(str(tmp_path / "policies"))


@pytest.fixture
def start_server(tmp_path, volume):
    servers = []

    def start(**options) -> Server:
        server = Server(volume.root, str(tmp_path), **{"interval": INTERVAL, **options})
        servers.append(server)
        server.wait_listening()
        return server

    yield start
    for server in servers:
        server.stop()


def version_of(language, files: dict[str, str]) -> str:
    return language.compile(files).version


class Client(threading.Thread):
    """Sends prioritize calls until stopped; records each answer's score, or the failure."""

    def __init__(self, server: Server) -> None:
        super().__init__(daemon=True)
        self.server, self.body = server, sample("prioritize")
        self.scores: list[float] = []
        self.failures: list[str] = []
        self.stopping = threading.Event()

    def run(self) -> None:
        while not self.stopping.is_set():
            try:
                self.scores.append(self.server.score(self.body))
            except Exception as exc:  # every kind of failure is counted, none may happen
                self.failures.append(repr(exc))

    def stop(self) -> "Client":
        self.stopping.set()
        self.join(timeout=15)
        return self


def test_reloads_under_load_fail_no_request_and_never_mix_versions(volume, language, start_server):
    v1 = {"a.policy": language.good(1)}
    volume.update(v1)
    server = start_server()
    server.wait_all_on(version_of(language, v1))
    clients = [Client(server) for _ in range(4)]
    for client in clients:
        client.start()
    for score in (2, 3, 2, 1, 3):
        files = {"a.policy": language.good(score)}
        volume.update(files)
        server.wait_all_on(version_of(language, files))
        time.sleep(0.2)
    answers = [s for c in (client.stop() for client in clients) for s in c.scores]
    failures = [f for c in clients for f in c.failures]
    assert failures == []
    assert len(answers) > 50 and set(answers) == {1, 2, 3}


def test_a_broken_update_never_replaces_a_good_one_and_a_fix_is_picked_up(volume, language, start_server):
    good = {"a.policy": language.good(1)}
    volume.update(good)
    server = start_server()
    server.wait_all_on(version_of(language, good))
    body = sample("prioritize")
    volume.update({"a.policy": language.broken()})
    time.sleep(INTERVAL * 4)
    assert {server.score(body) for _ in range(20)} == {1}
    _, status = server.get("/status")
    assert status["policy"]["last_reload_ok"] is False
    assert status["policy"]["errors"][0].startswith("a.policy:2:")
    assert server.get("/readyz")[0] == 200
    fixed = {"a.policy": language.good(2)}
    volume.update(fixed)
    server.wait_all_on(version_of(language, fixed))
    assert {server.score(body) for _ in range(20)} == {2}
    assert server.get("/status")[1]["policy"]["last_reload_ok"] is True


def test_a_session_keeps_its_version_until_the_next_open(volume, language, start_server):
    v1, v2 = {"a.policy": language.good(1)}, {"a.policy": language.good(2)}
    volume.update(v1)
    server = start_server()
    server.wait_all_on(version_of(language, v1))
    body = sample("prioritize")
    assert server.post("onSessionOpen", sample("onSessionOpen"))[0] == 200
    volume.update(v2)
    server.wait_all_on(version_of(language, v2))
    assert {server.score(body) for _ in range(30)} == {1}  # pinned at open, on every worker
    assert server.post("onSessionClose", b"{}")[0] == 200
    assert {server.score(body) for _ in range(10)} == {2}
    assert server.post("onSessionOpen", sample("onSessionOpen"))[0] == 200
    assert {server.score(body) for _ in range(10)} == {2}
    assert server.post("onSessionClose", b"{}")[0] == 200


def test_deleted_recreated_and_renamed_files_are_followed(volume, language, start_server):
    base = {"a.policy": language.good(1)}
    volume.update(base)
    server = start_server()
    body = sample("prioritize")
    steps = [
        {"a.policy": language.good(1), "b.policy": language.good(1)},  # a key added: 1 + 1
        {"b.policy": language.good(3)},                                  # a.policy deleted
        {"a.policy": language.good(1), "b.policy": language.good(3)},  # a.policy re-created
        {"c.policy": language.good(5)},                                  # everything renamed
    ]
    for files in steps:
        volume.update(files)
        server.wait_all_on(version_of(language, files))
        assert {server.score(body) for _ in range(10)} == {sum(language.score_in(t) for t in files.values())}


def test_starting_with_a_broken_set_serves_not_ready_and_says_why(volume, language, start_server):
    volume.update({"a.policy": language.broken()})
    server = start_server()
    status, body = server.get("/readyz")
    assert status == 503 and body["errors"][0].startswith("a.policy:2:")
    fixed = {"a.policy": language.good(1)}
    volume.update(fixed)
    server.wait_all_on(version_of(language, fixed))
    assert server.get("/readyz")[0] == 200


def test_sighup_to_the_gunicorn_master_reloads_every_worker(volume, language, start_server):
    v1, v2 = {"a.policy": language.good(1)}, {"a.policy": language.good(2)}
    volume.update(v1)
    server = start_server(interval=0)  # no watching: only a restart or a signal reloads
    server.wait_all_on(version_of(language, v1))
    volume.update(v2)
    time.sleep(1.0)
    assert set(server.worker_versions().values()) == {version_of(language, v1)}
    server.process.send_signal(signal.SIGHUP)  # gunicorn restarts its workers gracefully
    server.wait_all_on(version_of(language, v2), timeout=30)
    assert {server.score(sample("prioritize")) for _ in range(10)} == {2}


def test_sighup_to_a_worker_reloads_that_worker_at_once(volume, language, start_server):
    v1, v2 = {"a.policy": language.good(1)}, {"a.policy": language.good(2)}
    volume.update(v1)
    server = start_server(interval=600, inotify=False)  # neither polling nor inotify in time
    server.wait_all_on(version_of(language, v1))
    volume.update(v2)
    workers = server.worker_versions()
    assert set(workers.values()) == {version_of(language, v1)}
    for pid in workers:
        os.kill(pid, signal.SIGHUP)
    assert server.wait_all_on(version_of(language, v2), timeout=10) < 10
    assert set(server.worker_versions()) == set(workers)  # the same processes, not restarted


class Recorder(threading.Thread):
    """Calls ``call()`` until stopped, recording each outcome: a score, ``"HTTP <status>"`` for a
    non-200 answer, or ``"dropped"`` when the connection failed (a SIGKILLed worker's)."""

    def __init__(self, call) -> None:
        super().__init__(daemon=True)
        self.call = call
        self.outcomes: list = []
        self.stopping = threading.Event()

    def run(self) -> None:
        while not self.stopping.is_set():
            try:
                self.outcomes.append(self.call())
            except (OSError, http.client.HTTPException):
                self.outcomes.append("dropped")

    def stop(self) -> list:
        self.stopping.set()
        self.join(timeout=15)
        return self.outcomes


def prioritize_score(server: Server, body: bytes):
    status, raw = server.post("prioritize", body)
    if status != 200:
        return f"HTTP {status}"
    scores = set(json.loads(raw)["nodeScore"].values())
    return scores.pop() if len(scores) == 1 else f"mixed scores {sorted(scores)}"


def statuses_of_every_worker(server: Server, not_pids: frozenset[int] | set[int] = frozenset(), timeout: float = 30) -> dict:
    """{pid: /status} of ``server.workers`` workers none of whose pids is in ``not_pids``."""
    seen: dict[int, dict] = {}
    deadline = time.monotonic() + timeout
    while len(seen) < server.workers and time.monotonic() < deadline:
        _, status = server.get("/status")
        if status["pid"] not in not_pids:
            seen[status["pid"]] = status
    assert len(seen) == server.workers, f"only {sorted(seen)} answered (old: {sorted(not_pids)})"
    return seen


def test_workers_that_start_while_the_mount_is_broken_serve_the_last_good_set(volume, language, start_server):
    good = {"a.policy": language.good(1)}
    volume.update(good)
    server = start_server(workers=2)
    v1 = version_of(language, good)
    server.wait_all_on(v1)
    body = sample("prioritize")
    scores = [Recorder(lambda: prioritize_score(server, body)) for _ in range(3)]
    readyz = Recorder(lambda: server.request("GET", "/readyz")[0])
    for recorder in (*scores, readyz):
        recorder.start()

    volume.update({"a.policy": language.broken()})  # the kubelet's way: ..data swapped
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and any(s["policy"]["last_reload_ok"] for s in statuses_of_every_worker(server).values()):
        time.sleep(0.1)
    first = statuses_of_every_worker(server)

    os.kill(min(first), signal.SIGKILL)  # gunicorn forks a replacement, which boots on broken files
    replaced = statuses_of_every_worker(server, not_pids={min(first)})
    server.process.send_signal(signal.SIGHUP)  # gunicorn replaces every worker, all on broken files
    restarted = statuses_of_every_worker(server, not_pids=set(first) | set(replaced), timeout=60)
    time.sleep(1.0)
    outcomes = [o for recorder in scores for o in recorder.stop()]
    probes = readyz.stop()

    for status in (*replaced.values(), *restarted.values()):
        policy = status["policy"]
        assert status["policy_version"] == v1 and policy["ready"]
        assert policy["last_reload_ok"] is False and policy["errors"][0].startswith("a.policy:2:")
    (new_pid,) = set(replaced) - set(first)
    assert replaced[new_pid]["policy"]["from_last_good"]  # the replacement booted on broken files
    assert all(s["policy"]["from_last_good"] for s in restarted.values())
    metrics = server.request("GET", "/metrics")[1].decode()
    assert "policy_extender_policy_last_reload_successful 0.0" in metrics
    answered = Counter(o for o in outcomes if o != "dropped")
    print(f"\nrestart with a broken mount: {len(outcomes)} prioritize calls, answers {dict(answered)}, "
          f"{outcomes.count('dropped')} dropped (the SIGKILLed worker's), /readyz {dict(Counter(probes))}")
    assert set(answered) == {1}, "an answer came from no policy set (503) or another version"
    assert set(probes) - {"dropped"} == {200}
    assert outcomes.count("dropped") <= len(scores) and probes.count("dropped") <= 1  # the kill only


def test_check_on_a_kubelet_mount_reports_the_one_set_and_the_version_serve_reports(volume, start_server, tmp_path):
    """``policy-extender check DIR`` reads a ConfigMap volume the way serve does: the ``..data``
    payload once (not the timestamped directory as a second set), with serve's version; its
    diagnostics still name files a user can open."""
    import subprocess
    import sys
    volume.update({"zone.policy": "filter zone: node.labels.zone == task.annotations.zone\n",
                   "gpu.policy": "score gpu: 10 * free_gpu\n"})
    volume.update({"zone.policy": "filter zone: node.labels.zone == task.annotations.zone\n",
                   "gpu.policy": "score gpu: 20 * free_gpu\n"})  # a second payload directory came and went
    server = start_server(workers=2)
    served = set(server.worker_versions().values())
    assert len(served) == 1 and None not in served
    done = subprocess.run([sys.executable, "-m", "policy_extender", "check", volume.root, "--format", "json"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert [s["version"] for s in report["sets"]] == list(served)
    assert sorted(report["sets"][0]["files"]) == sorted(f"{volume.root}/{n}" for n in ("gpu.policy", "zone.policy"))
    text = subprocess.run([sys.executable, "-m", "policy_extender", "check", volume.root],
                          capture_output=True, text=True, timeout=120)
    assert text.stdout.strip() == "ok: 2 policy files, 2 rules, no errors"
    volume.update({"zone.policy": "filter zone: node.labels.zone == = 1\n", "gpu.policy": "score gpu: 1\n"})
    broken = subprocess.run([sys.executable, "-m", "policy_extender", "check", volume.root],
                            capture_output=True, text=True, timeout=120)
    assert broken.returncode == 1
    assert broken.stderr.splitlines()[0].startswith(f"{volume.root}/zone.policy:1:")
