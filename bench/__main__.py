"""``python -m bench [SCENARIO ...] [--quick] [--runs N] [--seconds S] [--baseline DIR] [--json FILE]``

Runs the named scenarios (all by default), prints every figure as it is measured, then the
targets with PASS/MISS. ``--list`` names the scenarios.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time

from bench.runs import LOAD_SERVERS, Context
from bench.scenarios import SCENARIOS, service_available
from bench.targets import report


def machine() -> str:
    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")), "?")
    mem = next((int(line.split()[1]) // 1024 // 1024 for line in open("/proc/meminfo") if line.startswith("MemTotal")), 0)
    return f"nproc {os.cpu_count()}, {cpu}, {mem} GiB, Python {platform.python_version()}"


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench", description="policy-extender benchmarks")
    parser.add_argument("scenarios", nargs="*", metavar="SCENARIO", help=f"any of: {', '.join(SCENARIOS)} (default: all)")
    parser.add_argument("--quick", action="store_true", help="tiny cluster, one short run: a smoke test, not figures")
    parser.add_argument("--runs", type=int, default=3, help="runs per figure; the median is reported (default 3)")
    parser.add_argument("--seconds", type=float, default=4.0, help="seconds per load run (default 4)")
    parser.add_argument("--procs", type=int, default=2, help="client processes for concurrent load (default 2)")
    parser.add_argument("--workers", type=int, default=2, help="gunicorn workers of every server (default 2)")
    parser.add_argument("--threads", type=int, default=4, help="gunicorn threads per worker (default 4)")
    parser.add_argument("--servers", default=",".join(LOAD_SERVERS), help=f"servers to measure (default {','.join(LOAD_SERVERS)})")
    parser.add_argument("--baseline", metavar="DIR", help="also run the service of another checkout (the code "
                        "before a change) as the server 'baseline', interleaved with the others")
    parser.add_argument("--json", metavar="FILE", help="also write every row as JSON")
    parser.add_argument("--list", action="store_true", help="list the scenarios and exit")
    args = parser.parse_args(argv)
    unknown = [s for s in args.scenarios if s not in SCENARIOS]
    if unknown:
        parser.error(f"unknown scenario {unknown[0]!r}; the scenarios are: {', '.join(SCENARIOS)}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse(sys.argv[1:] if argv is None else argv)
    if args.list:
        print("\n".join(SCENARIOS))
        return 0
    ctx = Context(quick=args.quick, runs=1 if args.quick else args.runs, seconds=0.5 if args.quick else args.seconds,
                  procs=args.procs, workers=args.workers, threads=args.threads, servers=tuple(args.servers.split(",")),
                  baseline=args.baseline)
    print(f"machine: {machine()}; servers: gunicorn {ctx.workers} workers x {ctx.threads} threads; "
          f"service: {service_available() or 'available'}", flush=True)
    started = time.perf_counter()
    for name in args.scenarios or list(SCENARIOS):
        print(f"\n== {name}", flush=True)
        SCENARIOS[name](ctx)
    print(f"\n== targets ({time.perf_counter() - started:.0f} s in all)")
    print("\n".join(report(ctx.rows)))
    for note in dict.fromkeys(ctx.notes):
        print(f"  note: {note}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"machine": machine(), "rows": ctx.rows, "notes": ctx.notes}, f, indent=1)
    errors = sum(row.get("errors", 0) for row in ctx.rows)
    return 1 if errors and args.quick else 0


if __name__ == "__main__":
    sys.exit(main())
