"""A ``--quick`` run of one load scenario against the bare WSGI floor: a real gunicorn over
loopback, the real client. Checks the run completes and reports sane figures; no timing limits."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

# Every test runs a benchmark script in a subprocess.
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


def test_quick_predicate_run_against_the_bare_floor(tmp_path):
    out = tmp_path / "rows.json"
    run = subprocess.run([sys.executable, "-m", "bench", "predicate-20", "--quick", "--servers", "bare", "--json", str(out)],
                         cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    rows = json.loads(out.read_text())["rows"]
    bare = [r for r in rows if r.get("server") == "bare"]
    assert len(bare) == 1, rows
    assert bare[0]["errors"] == 0
    assert bare[0]["n"] > 0 and bare[0]["rps"] > 0
    assert bare[0]["p50_ms"] <= bare[0]["p99_ms"] <= bare[0]["max_ms"]
    assert "== targets" in run.stdout


def test_unknown_scenario_is_refused_with_the_list():
    run = subprocess.run([sys.executable, "-m", "bench", "no-such"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert run.returncode == 2
    assert "unknown scenario 'no-such'" in run.stderr and "predicate-20" in run.stderr


def test_volcano_connection_pattern_dials_most_calls_of_a_fan_out_and_keep_alive_does_not(tmp_path):
    """The 2-idle mode behaves as Go's transport with MaxIdleConnsPerHost 2: after each fan-out all
    but 2 connections are closed, so most callers of the next fan-out dial again."""
    out = tmp_path / "rows.json"
    run = subprocess.run([sys.executable, "-m", "bench", "predicate-20-connections", "--quick", "--servers", "bare",
                          "--json", str(out)], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    rows = {r["connections"]: r for r in json.loads(out.read_text())["rows"] if r.get("server") == "bare"}
    assert set(rows) == {"keep-alive", "2-idle"}
    assert all(r["errors"] == 0 and r["n"] > 0 for r in rows.values())
    # quick: 6 nodes per fan-out; 2 of the 6 callers find an idle connection, 4 dial
    assert rows["2-idle"]["new_conn_per_call"] > 0.5
    assert rows["keep-alive"]["new_conn_per_call"] < 0.1
    assert "at most 2 stay idle" in run.stdout


def test_prioritize_cycle_runs_every_variant_with_every_call_answered():
    """``python -m bench.served.prioritize_cycle`` with a tiny cluster: each variant's prioritize after
    its task's predicates answered 200, no predicate failed, the method printed."""
    run = subprocess.run([sys.executable, "-m", "bench.served.prioritize_cycle", "--nodes", "6", "--pods", "4", "--tasks", "2",
                          "--warmup", "1", "--baseline", str(ROOT)], cwd=ROOT, capture_output=True, text=True, timeout=180)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "only the prioritize is timed" in run.stdout
    rows = [line for line in run.stdout.splitlines() if line.startswith("  ") and " p50 " in line]
    assert [line.split()[0] for line in rows] == ["kept", "default", "reuse-off", "floor", "baseline"]
    assert all("statuses [200]" in line and "predicates 18, failed 0" in line for line in rows), rows


def test_open_breakdown_after_predicates_takes_the_nodes_the_workers_kept():
    """``python -m bench.served.open_breakdown --after-predicates``: each open after its predicates is
    answered, and the service takes kept nodes where the service with reuse off takes none.
    One worker per server: which worker accepts a connection is the kernel's choice, and under
    load it gave all 36 predicates to one worker and the open to the other, which then had no
    node to take (a CI run failed so)."""
    run = subprocess.run([sys.executable, "-m", "bench.served.open_breakdown", "--nodes", "12", "--pods", "40", "--runs", "1",
                          "--after-predicates", "3", "--workers", "1", "--servers", "floor,service,service-reuse-off"],
                         cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "before each open, 36 predicates (3 tasks x 12 nodes)" in run.stdout
    line = next(line for line in run.stdout.splitlines() if line.startswith("round 1:"))
    assert "status" not in line, line  # every open answered 200
    service, off = line.split("service ")[1], line.split("service-reuse-off ")[1]
    reused = int(service.split("nodes reused ")[1].split(",")[0])
    assert reused >= 1 and "nodes reused 0, jobs reused 0)" in off, line


def test_open_breakdown_can_warm_every_worker_and_marks_a_workers_first_open():
    """``--warm-every-worker``: every worker of each server answered an open before the rounds
    (each pinned to its worker: the kernel alone sent 8 in a row to one worker), so no round is a worker's first open; without it, a round answered by a fresh worker says
    so, takes no job (nothing of an earlier open was kept there) and the report gives the
    medians without such rounds."""
    def rounds(*flags):
        run = subprocess.run([sys.executable, "-m", "bench.served.open_breakdown", "--nodes", "12", "--pods", "40",
                              "--runs", "4", "--servers", "floor,service", *flags],
                             cwd=ROOT, capture_output=True, text=True, timeout=300)
        assert run.returncode == 0, run.stdout + run.stderr
        return run.stdout, [line for line in run.stdout.splitlines() if line.startswith("round ")]

    out, lines = rounds("--warm-every-worker")
    assert "one warm-up open per worker of each server, pinned to it" in out and len(lines) == 4
    warmed = [line.split("answered by worker ")[1].split(", ") for line in out.splitlines() if line.startswith("warm-up ")]
    assert len(warmed) == 2 and all(len(set(pids)) == 2 for pids in warmed), out  # both workers of each server
    assert not any("first open" in line for line in lines), lines
    assert all("jobs reused 0" not in line.split("service ")[1] for line in lines), lines
    out, lines = rounds()
    firsts = [line.split("service ")[1] for line in lines if "its first open" in line.split("service ")[1]]
    for first in firsts:  # the kernel picks the worker: with 2 workers and 4 rounds, most runs have one
        assert "jobs reused 0" in first, first
    if firsts:
        assert "round(s) a worker's first open; the other" in out


def _instructions(calls: int) -> dict[str, float]:
    run = subprocess.run([sys.executable, "-m", "bench.cpu.instructions", "--calls", str(calls), "--warm", "10",
                          "--nodes", "10", "--pods", "4"],
                         cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    rows = {}
    for line in run.stdout.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] in ("service", "handwritten-wsgi", "bare"):
            rows[parts[0]] = float(parts[1].replace(",", ""))
    assert "engine extra" in run.stdout, run.stdout
    return rows


def test_instruction_counts_repeat_and_rank_the_apps():
    """``bench.cpu.instructions`` (callgrind) counts each app's calls; the same calls count the same
    instructions in two runs (what makes the meter usable on a noisy host), and the service does
    more than the hand-written app, which does more than the bare floor."""
    first, second = _instructions(20), _instructions(20)
    assert set(first) == {"service", "handwritten-wsgi", "bare"}
    for app in first:
        assert abs(first[app] - second[app]) <= 0.01 * first[app], (app, first[app], second[app])
    assert first["service"] > first["handwritten-wsgi"] > 5 * first["bare"] > 0
