"""``python -m bench.memory.inprocess`` on a few cycles: every cycle answered, the swaps loaded,
a sample every ``--every`` cycles, the slopes printed; nothing of the run left behind."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

# Runs the benchmark script in a subprocess.
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


def test_a_short_in_process_memory_run_samples_swaps_and_fits(tmp_path):
    run = subprocess.run([sys.executable, "-m", "bench.memory.inprocess", "--cycles", "4", "--every", "2",
                          "--swap-every", "2"], cwd=ROOT, capture_output=True, text=True, timeout=300,
                         env={"TMPDIR": str(tmp_path), "PATH": "/usr/bin:/bin"})
    assert run.returncode == 0, run.stdout + run.stderr
    samples = re.findall(r"^\s+(\d+)\s+\d+ s\s+in use\s+([\d.]+) MiB.*swaps (\d+)$", run.stdout, re.M)
    assert [(int(n), int(s)) for n, _, s in samples] == [(0, 0), (2, 1), (4, 2)]
    assert all(float(used) > 1 for _, used, _ in samples)
    assert len(re.findall(r"^slope over cycles 2-4: .* bytes per cycle$", run.stdout, re.M)) == 3
    assert "deleted under this process" not in run.stderr  # the store outlived the tally's last flush
    assert list(tmp_path.iterdir()) == []
