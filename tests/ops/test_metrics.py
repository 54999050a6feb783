"""Metrics summed across real worker processes through one multiprocess directory.

Each worker is a fresh interpreter (``spawn``) that imports prometheus_client after
``PROMETHEUS_MULTIPROC_DIR`` is set, as a gunicorn worker does after ``metrics.on_starting``.
The rendering happens in yet another fresh interpreter, as in the worker serving ``/metrics``.
"""

from __future__ import annotations

import multiprocessing
import os
import subprocess
import sys

import pytest
from prometheus_client.parser import text_string_to_metric_families

from policy_extender import metrics

SPAWN = multiprocessing.get_context("spawn")


def worker(directory: str, requests: int, version: str, ok: bool, conn) -> None:
    os.environ[metrics.MULTIPROC_ENV] = directory
    for _ in range(requests):
        metrics.observe_request("predicate", 200, 0.003, 2048)
    metrics.observe_request("prioritize", 500, 0.2, 5_000_000)
    metrics.count_decision("predicate", "zone-match", "reject")
    metrics.count_session("opened")
    metrics.set_policy_status(version, 1_700_000_000.0 + requests, ok, 0 if ok else 3)
    conn.send(os.getpid())
    conn.recv()  # stay alive until the parent says so


class Workers:
    """Worker processes of one test; every one still running is stopped at teardown."""

    def __init__(self, directory: str):
        self.directory = directory
        self.running: dict[int, tuple] = {}

    def start(self, requests: int, version: str = "v1", ok: bool = True) -> int:
        parent, child = SPAWN.Pipe()
        process = SPAWN.Process(target=worker, args=(self.directory, requests, version, ok, child))
        process.start()
        assert parent.poll(30), "worker did not report"
        pid = parent.recv()
        self.running[pid] = (process, parent)
        return pid

    def stop(self, pid: int) -> None:
        process, conn = self.running.pop(pid)
        conn.send("exit")
        process.join(30)
        assert process.exitcode == 0

    def stop_all(self) -> None:
        for pid in list(self.running):
            self.stop(pid)


RENDER = ("import sys, os; os.environ['PROMETHEUS_MULTIPROC_DIR'] = sys.argv[1];"
          "from policy_extender import metrics; sys.stdout.write(metrics.render()[0].decode())")


def scrape(directory: str) -> dict[tuple[str, tuple], float]:
    """Render in a fresh process; {(sample name, sorted labels): value}."""
    text = subprocess.run([sys.executable, "-c", RENDER, directory], check=True,
                          capture_output=True, text=True, cwd=os.getcwd()).stdout
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


@pytest.fixture
def directory(tmp_path):
    return metrics.prepare_directory(str(tmp_path / "prom"))


@pytest.fixture
def workers(directory):
    running = Workers(directory)
    yield running
    running.stop_all()


@pytest.fixture(autouse=True)
def restore_environment():
    saved = os.environ.get(metrics.MULTIPROC_ENV)
    yield
    if saved is None:
        os.environ.pop(metrics.MULTIPROC_ENV, None)
    else:
        os.environ[metrics.MULTIPROC_ENV] = saved


@pytest.mark.slow
def test_counts_are_summed_across_worker_processes(directory, workers):
    workers.start(3)
    workers.start(5)
    samples = scrape(directory)

    predicate = (("protocol", "volcano"), ("verb", "predicate"))
    assert samples[("policy_extender_request_duration_seconds_count", predicate)] == 8
    assert samples[("policy_extender_request_duration_seconds_sum", predicate)] == pytest.approx(0.024)
    assert samples[("policy_extender_request_duration_seconds_bucket", (("le", "0.0025"), *predicate))] == 0
    assert samples[("policy_extender_request_duration_seconds_bucket", (("le", "0.005"), *predicate))] == 8
    assert samples[("policy_extender_requests_total", (("code", "200"), *predicate))] == 8
    assert samples[("policy_extender_requests_total", (("code", "500"), ("protocol", "volcano"), ("verb", "prioritize")))] == 2
    assert samples[("policy_extender_request_body_bytes_sum", predicate)] == 8 * 2048
    assert samples[("policy_extender_decisions_total",
                    (("outcome", "reject"), ("protocol", "volcano"), ("rule", "zone-match"), ("verb", "predicate")))] == 2
    assert samples[("policy_extender_sessions_total", (("event", "opened"),))] == 2


@pytest.mark.slow
def test_gauges_combine_live_workers_and_forget_dead_ones(directory, workers):
    workers.start(1, version="v2", ok=True)
    failing = workers.start(9, version="v1", ok=False)

    samples = scrape(directory)
    assert samples[("policy_extender_policy_last_reload_successful", ())] == 0  # livemin
    assert samples[("policy_extender_policy_errors", ())] == 3  # livemax
    assert samples[("policy_extender_policy_info", (("version", "v1"),))] == 1
    assert samples[("policy_extender_policy_info", (("version", "v2"),))] == 1

    workers.stop(failing)
    metrics.child_exit(None, type("Worker", (), {"pid": failing})())

    samples = scrape(directory)
    assert samples[("policy_extender_policy_last_reload_successful", ())] == 1
    assert samples[("policy_extender_policy_errors", ())] == 0
    assert ("policy_extender_policy_info", (("version", "v1"),)) not in samples
    assert samples[("policy_extender_policy_info", (("version", "v2"),))] == 1
    # a dead worker's requests still count: counters never go down
    assert samples[("policy_extender_requests_total", (("code", "200"), ("protocol", "volcano"), ("verb", "predicate")))] == 10


@pytest.mark.slow
def test_a_new_version_replaces_the_old_in_policy_info(directory):
    code = ("import os, sys; os.environ['PROMETHEUS_MULTIPROC_DIR'] = sys.argv[1];"
            "from policy_extender import metrics;"
            "metrics.set_policy_status('old', 1.0, True, 0);"
            "metrics.set_policy_status('old', 2.0, False, 1);"
            "metrics.set_policy_status('new', 3.0, True, 0);"
            "sys.stdout.write(metrics.render()[0].decode())")
    text = subprocess.run([sys.executable, "-c", code, directory], check=True,
                          capture_output=True, text=True).stdout
    samples = {(s.name, tuple(s.labels.items())): s.value
               for f in text_string_to_metric_families(text) for s in f.samples}
    assert samples[("policy_extender_policy_info", (("version", "new"),))] == 1
    assert ("policy_extender_policy_info", (("version", "old"),)) not in samples  # gone, not 0
    assert samples[("policy_extender_policy_last_reload_success_timestamp_seconds", ())] == 3.0


def test_prepare_directory_removes_only_stale_metric_files(tmp_path):
    (tmp_path / "counter_123.db").write_bytes(b"stale")
    (tmp_path / "policy-version-123.txt").write_text("a version no worker serves now")
    (tmp_path / "session-gaps-123.json").write_text("{}")
    (tmp_path / "keep.txt").write_text("not ours")
    assert metrics.prepare_directory(str(tmp_path)) == str(tmp_path)
    assert sorted(os.listdir(tmp_path)) == ["keep.txt"]
    assert os.environ[metrics.MULTIPROC_ENV] == str(tmp_path)


@pytest.mark.slow
def test_setting_the_directory_after_import_is_refused(tmp_path):
    code = ("import os, sys, prometheus_client;"
            "os.environ['PROMETHEUS_MULTIPROC_DIR'] = sys.argv[1];"
            "from policy_extender import metrics; metrics.count_session('opened')")
    result = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True)
    assert result.returncode != 0
    assert "was set after prometheus_client was imported" in result.stderr


def test_unknown_session_event_is_an_error():
    with pytest.raises(ValueError, match="opened, closed, expired"):
        metrics.count_session("reopened")
