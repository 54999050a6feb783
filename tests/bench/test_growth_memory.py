"""bench.memory.growth and bench.memory.served: their arithmetic, and short real runs (a real ``serve`` over
loopback) that complete and report what they promise; no timing or RSS limits."""

import subprocess
import sys
from pathlib import Path

import pytest

from bench.memory.growth import DEFAULT_FLAGS, fit, nearest_rank, refused_before_reading
from bench.memory.served import fit_slope, late_fits, policy_text
from bench.server import Server

ROOT = Path(__file__).resolve().parents[2]


def test_fit_is_least_squares():
    assert fit([(0, 0.0), (1, 2.0), (2, 1.0)]) == pytest.approx((0.5, 0.5))  # not on a line: the fit, not two points
    assert fit_slope([(0, 1.0), (1, 3.0), (2, 5.0)]) == pytest.approx(2.0)
    assert fit_slope([(1, 5.0)]) == 0.0


def test_nearest_rank_percentile():
    values = [float(v) for v in range(1, 101)]
    assert nearest_rank(values, 0.99) == 99.0
    assert nearest_rank(values, 0.5) == 50.0
    assert nearest_rank([3.0, 1.0], 0.99) == 3.0


def test_late_fits_start_where_asked_and_need_three_samples():
    samples = [(t * 60.0, {}, 100.0 + (t if t < 5 else 5 + 0.1 * (t - 5)), {}) for t in range(12)]
    fits = late_fits(samples, (0, 5, 10, 11))
    assert [(start, count) for start, count, *_ in fits] == [(0, 12), (5, 7)]
    assert abs(fits[1][2] - 0.1) < 1e-9 and fits[1][3:] == (105.0, 105.6)


def test_every_swap_is_a_new_policy_version():
    from policy_extender.policyset.compile import compile_sources
    versions = {compile_sources({"gpu.policy": policy_text(n)}).version for n in range(3)}
    assert len(versions) == 3


@pytest.mark.slow
def test_a_prioritize_body_over_the_default_limit_is_refused_from_its_headers():
    with Server("service", extra=DEFAULT_FLAGS) as server:
        assert refused_before_reading(server, 300 << 20) == 413


@pytest.mark.slow
def test_quick_growth_run_prints_every_row():
    run = subprocess.run([sys.executable, "-m", "bench.memory.growth", "--quick"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr
    table = [line for line in run.stdout.splitlines() if line.startswith("| ")]
    assert [line.split(" | ")[0] for line in table[1:]] == [
        "| predicate: server CPU per call vs pods per node (50 nodes)", "| prioritize: p50 vs nodes (30 pods/node, all nodes in the body)",
        "| onSessionOpen: time vs nodes (30 pods/node)", "| onSessionOpen: RSS vs nodes (30 pods/node)"]
    assert "statuses [200]" in run.stdout and "statuses [4" not in run.stdout and "statuses [5" not in run.stdout


@pytest.mark.slow
def test_short_memory_run_samples_every_process_and_fits_a_slope():
    run = subprocess.run([sys.executable, "-m", "bench.memory.served", "--minutes", "0.2", "--interval", "3", "--warmup", "0",
                          "--late", "0.05,5"],
                         cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    assert " 0 non-200 answers" in run.stdout
    assert "slope after warm-up (MiB/min): master " in run.stdout and "worker 2 " in run.stdout
    samples = [line for line in run.stdout.splitlines() if line.strip()[:1].isdigit() and "|" in line]
    assert len(samples) >= 4
    late = [line for line in run.stdout.splitlines() if line.startswith("total from minute")]
    assert len(late) == 1 and late[0].startswith("total from minute 0.05 ("), late  # none from minute 5
