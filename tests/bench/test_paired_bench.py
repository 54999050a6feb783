"""``python -m bench.cpu.paired``: both apps timed on the same bodies in every round, sharing the
kept nodes (so neither decodes whole what the other kept), and nothing left behind."""

import subprocess
import sys
from pathlib import Path

import pytest

from bench import handwritten
from bench.cpu import paired

ROOT = Path(__file__).resolve().parents[2]


def test_every_round_times_both_apps_on_kept_nodes_and_restores_the_hand_written_reads():
    reads = handwritten.READS
    per_call, decoded = paired.measure(rounds=4, block=6)
    assert set(per_call) == {"service", "handwritten-wsgi"}
    assert all(len(blocks) == 4 and all(t > 0 for t in blocks) for blocks in per_call.values())
    assert decoded == 0  # with two read sets, each switch would drop the other's kept nodes
    assert handwritten.READS is reads


@pytest.mark.slow
def test_a_short_run_prints_the_ratio_and_exits_without_store_warnings():
    run = subprocess.run([sys.executable, "-m", "bench.cpu.paired", "--rounds", "3", "--block", "5"],
                         cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "service / handwritten-wsgi: " in run.stdout and "summed (engine extra" in run.stdout
    assert "nodes decoded whole during the rounds (not taken from the kept ones): 0" in run.stdout
    assert "deleted under this process" not in run.stderr, run.stderr
    assert "did not take" not in run.stderr, run.stderr
