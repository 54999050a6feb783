"""``python -m bench.cpu.inprocess`` runs, prints every app's CPU per call, and leaves nothing
behind: its service is flushed and stopped while its temporary store still exists (before,
the tally's exit flush wrote to a deleted store and warned that a session and a tally were
lost, which read like a failure of the run)."""

import subprocess
import sys
from pathlib import Path

import pytest

# Runs the benchmark script in a subprocess.
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


def test_a_short_run_prints_each_app_and_exits_without_store_warnings():
    run = subprocess.run([sys.executable, "-m", "bench.cpu.inprocess", "--session", "--rounds", "1", "--calls", "30"],
                         cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    for app in ("service", "service-reuse-off", "handwritten-wsgi", "handwritten-reuse-off", "bare"):
        assert f"\n  {app} " in run.stdout, run.stdout
    assert "engine extra" in run.stdout
    assert "per round, service / handwritten-wsgi: median " in run.stdout and "over 1 rounds" in run.stdout
    assert "deleted under this process" not in run.stderr, run.stderr
    assert "did not take" not in run.stderr, run.stderr
