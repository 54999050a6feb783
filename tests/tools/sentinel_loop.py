"""Run the Sentinel failover tests N times, each run as its own pytest process (as the whole
suite runs them), under CPU load, and print how many runs and tests passed.

    nice -n 10 .venv/bin/python -m tests.tools.sentinel_loop --runs 30 [--load 1] [--max-seconds 5400]

The load is ``--load`` busy-looping processes (default 1: the machine's other core while a test
runs), each stopped when its run ends. No run starts after ``--max-seconds``, and a run is
stopped (and counted failed) after ``--run-seconds``.
A run that fails keeps its output in ``--keep DIR`` (default /tmp/sentinel-loop) to read the cause.
Everything started is on loopback (the tests' own redis-server, redis-sentinel and gunicorn).
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import re
import subprocess
import sys
import time
from pathlib import Path

#: every test that makes a Sentinel failover (grep -l sentinel tests: the others run none)
TESTS = ["tests/session/test_sentinel.py", "tests/served/test_sentinel_failover.py",
         "tests/ops/test_redis_sentinel_manifest.py"]


def busy(until: float) -> None:
    """Spin until ``until`` (time.monotonic()): one core's worth of load, bounded in time."""
    n = 0
    while time.monotonic() < until:
        for _ in range(100_000):
            n += 1


def one_run(number: int, load: int, run_seconds: float, keep: Path) -> tuple[bool, int, int, float]:
    """(passed, tests passed, tests failed, seconds) of one pytest run under ``load`` spinners."""
    deadline = time.monotonic() + run_seconds
    spinners = [multiprocessing.Process(target=busy, args=(deadline,), daemon=True) for _ in range(load)]
    for spinner in spinners:
        spinner.start()
    started = time.monotonic()
    try:
        done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *TESTS],
                              capture_output=True, text=True, timeout=run_seconds)
        output, code = done.stdout + done.stderr, done.returncode
    except subprocess.TimeoutExpired as expired:
        output, code = f"timed out: {expired}", -1
    finally:
        for spinner in spinners:
            spinner.terminate()
            spinner.join()
    seconds = time.monotonic() - started
    passed = int(m.group(1)) if (m := re.search(r"(\d+) passed", output)) else 0
    failed = int(m.group(1)) if (m := re.search(r"(\d+) (?:failed|error)", output)) else 0
    if code != 0:
        keep.mkdir(parents=True, exist_ok=True)
        (keep / f"run-{number:02d}.txt").write_text(output)
    return code == 0, passed, failed, seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--load", type=int, default=1, help="busy-looping processes during each run")
    parser.add_argument("--max-seconds", type=float, default=5400.0, help="start no run after this")
    parser.add_argument("--run-seconds", type=float, default=900.0, help="stop a run after this (failed)")
    parser.add_argument("--keep", type=Path, default=Path("/tmp/sentinel-loop"))
    args = parser.parse_args()
    deadline = time.monotonic() + args.max_seconds
    good = 0
    times = []
    print(f"{args.runs} runs of {' '.join(TESTS)}, each beside {args.load} busy loop(s); "
          f"pid {os.getpid()}, nice {os.nice(0)}", flush=True)
    for number in range(1, args.runs + 1):
        if time.monotonic() >= deadline:
            print(f"stopped after {number - 1} runs: --max-seconds reached", flush=True)
            break
        ok, passed, failed, seconds = one_run(number, args.load, args.run_seconds, args.keep)
        good += ok
        times.append(seconds)
        print(f"run {number}: {'pass' if ok else 'FAIL'} ({passed} passed, {failed} failed, {seconds:.0f} s); "
              f"{good} of {number} runs passed", flush=True)
    runs = len(times)
    times.sort()
    median = times[runs // 2] if runs else 0.0
    print(f"{good} passed, {runs - good} failed  (runs; median run {median:.0f} s)", flush=True)
    return 0 if good == runs == args.runs else 1


if __name__ == "__main__":
    sys.exit(main())
