"""Benchmark: the per-request cost of metrics.observe_request, in µs. Prints figures only.

    python tests/ops/bench_metrics.py            # both modes, fresh interpreter each
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import timeit

CALLS = 100_000


def measure() -> None:
    from policy_extender import metrics

    metrics.observe_request("predicate", 200, 0.001, 1)  # build the metrics and the children
    for name, statement in [
        ("observe_request", lambda: metrics.observe_request("predicate", 200, 0.0042, 140_000)),
        ("count_decision", lambda: metrics.count_decision("predicate", "zone-match", "reject")),
    ]:
        best = min(timeit.repeat(statement, number=CALLS, repeat=5)) / CALLS
        mode = "multiprocess (mmap)" if os.environ.get(metrics.MULTIPROC_ENV) else "single process"
        print(f"{name:16} {mode:20} {best * 1e6:6.2f} µs/call")


def main() -> None:
    if sys.argv[1:] == ["--child"]:
        measure()
        return
    env = {k: v for k, v in os.environ.items() if k != "PROMETHEUS_MULTIPROC_DIR"}
    subprocess.run([sys.executable, __file__, "--child"], env=env, check=True)
    with tempfile.TemporaryDirectory() as directory:
        subprocess.run([sys.executable, __file__, "--child"],
                       env={**env, "PROMETHEUS_MULTIPROC_DIR": directory}, check=True)


if __name__ == "__main__":
    main()
