"""What an outcome case costs once the engine is built (issue 46, item 4: "outcome cases of 50
nodes run in seconds").

Writes a fixture file of outcome cases (``cluster:``) over ``--nodes`` nodes (a node set) with
``--running`` running pods per node and ``--jobs`` pending jobs of 4 tasks, the shipped
``policies/`` set and the shipped sidecar conf, then runs it ``--rounds`` times through
``policy-extender test`` (the users' command: engine found in the cache, a real ``serve`` started
per case, Volcano's whole cycle, ``why`` not asked) and times, per case: the command's wall time
divided by the cases, and, from the engine's report, Volcano's cycle (OpenSession to
CloseSession). Medians of the rounds, side by side for each size; the first build of the engine
is not timed (it is reported when it happens).

``python -m bench.outcome_cases [--sizes 10,50] [--rounds 3] [--cases 3]``
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from policy_extender.fixture_runner.engine import engine_for

ROOT = Path(__file__).resolve().parents[1]


def fixture(nodes: int, running: int, jobs: int, cases: int) -> str:
    """A fixture file of ``cases`` alike outcome cases over one cluster."""
    cluster = {
        "priorityClasses": {"high": 1000, "low": 10},
        "nodeSets": [{"name": "node", "count": nodes, "labels": {"zone": "a"},
                      "allocatable": {"cpu": "16", "memory": "64Gi", "pods": "110", "nvidia.com/gpu": "8"}}],
        "jobs": [{"name": "running", "minMember": 1, "phase": "Running", "priorityClass": "low",
                  "tasks": [{"name": "w", "replicas": nodes * running, "requests": {"cpu": "1", "memory": "1Gi"},
                             "nodes": [f"node-{i % nodes:04d}" for i in range(nodes * running)]}]}]
        + [{"name": f"pending-{j}", "minMember": 4, "priorityClass": "high",
            "tasks": [{"name": "w", "replicas": 4, "requests": {"cpu": "2", "memory": "2Gi"}}]} for j in range(jobs)],
    }
    document = {"policies": sorted(p.name for p in (ROOT / "policies").glob("*.policy")),
                "scheduler_conf": str(ROOT / "docker" / "k8s" / "sidecar" / "volcano-scheduler.conf"),
                "cases": [{"name": f"case {i}", "cluster": cluster, "expect": {"evictions": []}} for i in range(cases)]}
    return json.dumps(document)


def run_once(directory: Path) -> tuple[float, list[float], int, list[float]]:
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "policy_extender", "test", "--json", str(directory)],
                          capture_output=True, text=True, timeout=1800, env=dict(os.environ))
    wall = time.perf_counter() - started
    report = json.loads(done.stdout)
    failed = report["summary"]["failed"] + report["summary"]["errors"]
    if failed:
        raise SystemExit(f"outcome cases failed:\n{done.stdout[-3000:]}")
    cycles = [r["actual"]["cycle_ms"] / 1000 for r in report["results"] if r["actual"].get("cycle_ms")]
    return wall, [r["duration_seconds"] for r in report["results"]], len(report["results"]), cycles


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10,50", help="node counts, comma-separated")
    parser.add_argument("--running", type=int, default=8, help="running pods per node")
    parser.add_argument("--jobs", type=int, default=5, help="pending jobs of 4 tasks")
    parser.add_argument("--cases", type=int, default=3, help="outcome cases per run")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    started = time.perf_counter()
    engine = engine_for(None)
    print(f"engine: Volcano {engine.release}, {engine.binary} (found or built in {time.perf_counter() - started:.1f} s)")
    print(f"method: {args.cases} outcome cases per `policy-extender test` run, {args.rounds} rounds, "
          f"{args.running} running pods per node, {args.jobs} pending jobs x 4 tasks, policies/ and the shipped conf; "
          f"load average {os.getloadavg()[0]:.1f}")
    print("| nodes | pods | per case: wall (median of rounds) | per case: the runner's duration, median (min-max) "
          "| of which Volcano's cycle (OpenSession to CloseSession), median | whole run |")
    print("|---|---|---|---|---|---|")
    for nodes in (int(n) for n in args.sizes.split(",")):
        with tempfile.TemporaryDirectory() as work:
            directory = Path(work)
            for policy in (ROOT / "policies").glob("*.policy"):
                (directory / policy.name).write_text(policy.read_text())
            (directory / "bench.fixtures.yaml").write_text(fixture(nodes, args.running, args.jobs, args.cases))
            walls, durations, cycles = [], [], []
            for _ in range(args.rounds):
                wall, each, count, cycle = run_once(directory)
                walls.append(wall / count)
                durations += each
                cycles += cycle
            print(f"| {nodes} | {nodes * args.running} running + {args.jobs * 4} pending | {statistics.median(walls):.2f} s | "
                  f"{statistics.median(durations):.2f} s ({min(durations):.2f}-{max(durations):.2f}) | "
                  f"{statistics.median(cycles):.3f} s | {statistics.median(walls) * args.cases:.1f} s for {args.cases} |")


if __name__ == "__main__":
    main()
