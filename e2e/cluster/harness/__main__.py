"""python -m harness [--extender policy-extender|constant|none] [--compare] [--keep] [--json FILE]
[TRACE ...]: each trace on a cluster of its own (scripts/e2e-cluster builds the binaries first)."""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path

from .control_plane import CLUSTER, Cluster
from .run import Run
from .trace import TraceError, load

EXTENDERS = ("policy-extender", "constant", "none")


def run_one(path: Path, extender: str, keep: bool, log) -> dict:
    trace = load(path)
    run_dir = CLUSTER / ".build" / "runs" / f"{trace.name}-{extender}-{time.strftime('%H%M%S')}"
    log(f"{trace.name} ({extender}): {trace.description.splitlines()[0] if trace.description else ''}")
    cluster = Cluster(run_dir, CLUSTER / ".build" / "bin", extender=extender, policies=trace.policies,
                      values=trace.values, log=lambda m: log("  " + m))
    result: dict = {"trace": trace.name, "extender": extender, "run": str(run_dir)}
    try:
        cluster.up()
        run = Run(trace, cluster, log=log)
        run.setup()
        result["stats"] = run.play()
        judged = extender == "policy-extender"   # the policies' invariants hold only with the policies
        findings = [f for f in run.checks.findings if judged or f.check in ("gang", "bound_once", "submit", "event")]
        result["findings"] = [f.__dict__ for f in findings]
        result["checked"] = dict(run.checks.counted)
        result["unjudged"] = [f.__dict__ for f in run.checks.unjudged]
        result["events"] = run.event_log
        (run_dir / "observed.json").write_text(json.dumps(observed(run), indent=1, default=str))
    except Exception as e:
        result["findings"] = [{"check": "harness", "at": 0, "message": f"{type(e).__name__}: {e}"}]
    finally:
        cluster.down()
    for f in result.get("unjudged", []):
        log(f"  unjudged at {f['at']:.1f}s: {f['message']}")
    for f in result["findings"]:
        log(f"  FAIL {f['check']} at {f['at']:.1f}s: {f['message']}")
    status = "passed" if not result["findings"] else f"FAILED ({len(result['findings'])} findings)"
    log(f"  {trace.name} ({extender}): {status}; {json.dumps(result.get('stats', {}))}")
    if not keep and not result["findings"]:
        shutil.rmtree(run_dir, ignore_errors=True)
    else:
        log(f"  logs: {run_dir}/logs")
    return result


def observed(run: Run) -> dict:
    """What the watches saw, for reading a failure after the cluster is gone."""
    w = run.observer.world
    return {
        "pods": [p.__dict__ for p in w.pods.values()],
        "podgroups": {k: {"spec": v.get("spec"), "status": v.get("status")} for k, v in w.podgroups.items()},
        "jobs": {k: (v.get("status") or {}) for k, v in w.jobs.items()},
        "events": [{"at": round(t, 2), "reason": e.get("reason"), "object": e.get("involvedObject", {}).get("name"),
                    "message": e.get("message")} for t, e in w.events],
        "why": [{"name": r["name"], "exit": code, "output": out} for r, code, out in run.why_results],
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="scripts/e2e-cluster", description=__doc__)
    p.add_argument("traces", nargs="*", type=Path)
    p.add_argument("--extender", choices=EXTENDERS, default="policy-extender")
    p.add_argument("--compare", action="store_true",
                   help="run each trace with every extender (policy-extender, constant, none) and print a table")
    p.add_argument("--keep", action="store_true", help="keep the run directory of a passing trace")
    p.add_argument("--json", type=Path, help="write the results here")
    args = p.parse_args(argv)
    traces = args.traces or sorted((CLUSTER / "traces").glob("*.trace.yaml"))
    log = lambda m: print(m, flush=True)  # noqa: E731
    try:
        for t in traces:
            load(t)
    except (TraceError, OSError) as e:
        print(f"e2e-cluster: {e}", file=sys.stderr)
        return 2
    results = []
    for t in traces:
        for extender in (EXTENDERS if args.compare else (args.extender,)):
            results.append(run_one(t.resolve(), extender, args.keep, log))
    if args.compare:
        print("\n| trace | extender | pods bound | binds/min | job wait p50 (s) | p99 (s) | cycle mean (ms) | cycles |")
        print("|---|---|---|---|---|---|---|---|")
        for r in results:
            s = r.get("stats", {})
            print(f"| {r['trace']} | {r['extender']} | {s.get('pods_bound')} | {s.get('binds_per_minute')} | "
                  f"{s.get('wait_p50_s')} | {s.get('wait_p99_s')} | {s.get('cycle_mean_ms')} | {s.get('cycles')} |")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=1))
    failed = [r for r in results if r["findings"]]
    print(f"e2e-cluster: {len(results) - len(failed)} of {len(results)} runs passed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
