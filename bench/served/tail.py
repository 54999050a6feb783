"""The predicate latency tail at 16 concurrent keep-alive connections, against the floor, and where
it comes from.

Servers, under the service's shipped gunicorn settings (2 workers x 4 threads), started once and
loaded in interleaved rounds (floor, service, variants..., each round starting one server
later than the last, so none always runs first or last), each round ``--seconds``
of closed-loop load from ``bench.load.drive`` (16 connections in 2 forked client processes, 50
nodes x 20 pods Volcano-shaped predicate bodies, ``bench.generate``), one warm-up round first:

* ``floor``: ``bench.bare_wsgi:socket_app``: reads the body as the service does, answers a
  constant;
* ``service``: ``policy-extender serve`` on ``bench/policies`` (SQLite store, a session open so
  every call reads its head, as in a cycle);
* variants: the same service started through ``python -m bench.served.tail serve-variant NAME``, which
  changes one thing in the master before the workers fork (``--variants``):
  ``switch-1ms`` / ``switch-0.5ms`` (``sys.setswitchinterval``: GIL hand-offs between the
  gthread threads sooner), ``gc-off`` (``gc.disable``: what the garbage collector costs),
  ``reuse-off`` (``node_reuse_bytes`` 0: every predicate node decoded, as before node reuse),
  ``arenas-default`` (``MALLOC_ARENA_MAX`` set in the environment, so ``heap.bound_arenas``
  leaves glibc's default of 8 arenas per core: the service before the arena cap).

Per server: req/s, p50, p99 and max client latency (medians over rounds), and the ratio of p99
to the floor's p99 of the same round. The services run with ``POLICY_EXTENDER_TRACE``: from the
workers' own timings, per server, the time a call spent inside the app (dispatch to answer
built) at p50/p99, the garbage collections (count per generation, total and longest pause) and
the metrics flushes, and how many of the slowest 1 % of calls (by time in the app) overlapped a
collection or a flush in their worker. The client's p99 minus the app's p99 is time outside the app:
gunicorn (poller, thread pool queue, parsing, writing) and waiting for the GIL.

``python -m bench.served.tail [--rounds 6] [--seconds 3] [--variants switch-1ms,gc-off]``
"""

from __future__ import annotations

import argparse
import bisect
import gc
import os
import statistics
import sys
import tempfile
import time

from bench.generate import Bodies, Cluster, ClusterSpec, write_snapshot
from bench.load import Connection, drive
from bench.served.open_breakdown import TracedServer, load_average

VARIANTS = {
    "switch-1ms": lambda: sys.setswitchinterval(0.001),
    "switch-0.5ms": lambda: sys.setswitchinterval(0.0005),
    "gc-off": gc.disable,
    # the service before node reuse: every predicate body decoded whole (wire/node_reuse.py)
    "reuse-off": lambda: os.environ.__setitem__("POLICY_EXTENDER_NODE_REUSE_BYTES", "0"),
    # the service before the arena cap (policy_extender/heap.py): glibc's default, 8 per core
    "arenas-default": lambda: os.environ.__setitem__("MALLOC_ARENA_MAX", str(8 * (os.cpu_count() or 1))),
}


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))] if values else 0.0


def analyse(lines: list[dict]) -> dict:
    calls = [r for r in lines if r.get("kind") == "request" and r["verb"] == "predicate"]
    if not calls:
        return {}
    inside = [r["end"] - r["start"] for r in calls]
    p99 = pct(inside, 0.99)
    gcs = [r for r in lines if r.get("kind") == "gc"]
    flushes = [r for r in lines if r.get("kind") == "flush"]
    by_pid: dict[int, list] = {}
    for event in gcs + flushes:
        by_pid.setdefault(event["pid"], []).append((event["start"], event["end"], event["kind"]))
    for events in by_pid.values():
        events.sort()
    slow = sorted(calls, key=lambda r: r["end"] - r["start"])[-max(1, len(calls) // 100):]  # the slowest 1 %
    hit = {"gc": 0, "flush": 0}
    for r in slow:
        events = by_pid.get(r["pid"], [])
        i = bisect.bisect_left(events, (r["start"] - 1.0,))
        kinds = {kind for start, end, kind in events[i:] if start < r["end"] and end > r["start"]}
        for kind in kinds:
            hit[kind] += 1
    pauses = {g: [e["end"] - e["start"] for e in gcs if e["generation"] == g] for g in (0, 1, 2)}
    seconds = max(r["end"] for r in calls) - min(r["start"] for r in calls)
    return {"inside_p50": pct(inside, 0.5), "inside_p99": p99, "calls": len(calls), "slow": len(slow),
            "slow_in_gc": hit["gc"], "slow_in_flush": hit["flush"],
            "gc": {g: (len(p), sum(p), max(p, default=0.0)) for g, p in pauses.items()},
            "gc_per_s": len(gcs) / seconds if seconds else 0.0,
            "flush": (len(flushes), max((e["end"] - e["start"] for e in flushes), default=0.0))}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["serve-variant"]:
        VARIANTS[argv[1]]()
        from policy_extender.cli import main as cli
        return cli(argv[2:])
    parser = argparse.ArgumentParser(prog="python -m bench.served.tail", description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--variants", default="switch-1ms,gc-off", help=f"comma-separated, of: {', '.join(VARIANTS)} (or empty)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--threads", type=int, default=4)
    args = parser.parse_args(argv)
    bodies = Bodies(Cluster(ClusterSpec(nodes=50, pods_per_node=20)))
    jobs = bodies.cluster.spec.pending_job_count
    calls = [("predicate", "/predicate", body) for p in range(min(4, jobs)) for body in bodies.predicates(p)]
    variants = [v for v in args.variants.split(",") if v]
    print(f"method: bench/served/tail.py: predicate 50x20 ({len(calls)} bodies), 16 keep-alive connections in 2 client "
          f"processes, {args.rounds} interleaved rounds of {args.seconds:g} s after a warm-up round; gunicorn "
          f"{args.workers} workers x {args.threads} threads; nproc {os.cpu_count()}; load at start "
          f"{open('/proc/loadavg').read().split()[:3]}", flush=True)
    with tempfile.TemporaryDirectory(prefix="bench-tail-") as tmp:
        snapshot = os.path.join(tmp, "open.json")
        with open(snapshot, "wb") as f:
            write_snapshot(bodies.cluster, f)
        servers: dict[str, TracedServer] = {}
        try:
            servers["floor"] = TracedServer("bare-socket", None, workers=args.workers, threads=args.threads).start()
            for name in ["service", *variants]:
                kw = dict(workers=args.workers, threads=args.threads,
                          extra=("--session-store", f"sqlite:{tmp}/{name}.sqlite3"))
                trace_path = f"{tmp}/{name}.trace"
                launcher = () if name == "service" else ("bench.served.tail", "serve-variant", name)
                servers[name] = TracedServer("service", trace_path, launcher, **kw).start()
            for name, server in servers.items():
                if name != "floor":
                    Connection(server.host, server.port, timeout=60).request("/onSessionOpen", snapshot)
            rounds: list[dict] = []
            for n in range(args.rounds + 1):
                row = {}
                order = list(servers.items())
                order = order[n % len(order):] + order[:n % len(order)]  # each server first in turn
                for name, server in order:
                    server.new_trace()
                    load = load_average()
                    result = drive(server.host, server.port, calls, concurrency=16, seconds=args.seconds, procs=2)
                    s = result.summary("predicate")
                    time.sleep(0.6)
                    row[name] = {"rps": result.rate(), "p50": s["p50"], "p99": s["p99"], "max": s["max"],
                                 "errors": result.errors.get("predicate", 0), "load": load,
                                 "trace": analyse(server.new_trace())}
                if n == 0:
                    continue  # warm-up
                row = {name: row[name] for name in servers}
                rounds.append(row)
                print(f"round {n}: " + "  ".join(
                    f"{k} {v['rps']:.0f}/s p50 {v['p50'] * 1e3:.1f} p99 {v['p99'] * 1e3:.1f} ms"
                    + (f" ratio {v['p99'] / row['floor']['p99']:.2f}" if k != "floor" else "")
                    + (f" {v['errors']} errors" if v["errors"] else "") for k, v in row.items()), flush=True)
        finally:
            for server in servers.values():
                server.stop()
    report(rounds)
    return 0


def report(rounds: list[dict]) -> None:
    names = list(rounds[0])
    med = lambda k, f: statistics.median(r[k][f] for r in rounds)  # noqa: E731
    print("\n| server | req/s | p50 ms | p99 ms | max ms | p99 / floor p99 (median of rounds) | req/s / floor |")
    print("|---|---|---|---|---|---|---|")
    for k in names:
        ratio = statistics.median(r[k]["p99"] / r["floor"]["p99"] for r in rounds)
        rps = statistics.median(r[k]["rps"] / r["floor"]["rps"] for r in rounds)
        print(f"| {k} | {med(k, 'rps'):.0f} | {med(k, 'p50') * 1e3:.1f} | {med(k, 'p99') * 1e3:.1f} | "
              f"{med(k, 'max') * 1e3:.1f} | {ratio:.2f} | {rps:.2f} |")
    print("\nfrom the workers' traces (medians over rounds; 'in app' = dispatch to answer built):\n")
    print("| server | in app p50 ms | in app p99 ms | client p99 - app p99 ms | collections/s | gen0 / gen1 / gen2 count | "
          "gen2 pause max ms | all GC ms per round | slowest 1 % of calls in a GC | ... in a metrics flush | flush max ms |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for k in names:
        traced = [r[k]["trace"] for r in rounds if r[k]["trace"]]
        if not traced:
            continue
        m = lambda f: statistics.median(t[f] for t in traced)  # noqa: E731
        gens = " / ".join(f"{statistics.median(t['gc'][g][0] for t in traced):.0f}" for g in (0, 1, 2))
        gen2_max = max(t["gc"][2][2] for t in traced)
        total = statistics.median(sum(t["gc"][g][1] for g in (0, 1, 2)) for t in traced)
        slow = f"{sum(t['slow_in_gc'] for t in traced)} of {sum(t['slow'] for t in traced)}"
        in_flush = f"{sum(t['slow_in_flush'] for t in traced)} of {sum(t['slow'] for t in traced)}"
        print(f"| {k} | {m('inside_p50') * 1e3:.2f} | {m('inside_p99') * 1e3:.2f} | "
              f"{(med(k, 'p99') - m('inside_p99')) * 1e3:.1f} | {m('gc_per_s'):.0f} | {gens} | {gen2_max * 1e3:.1f} | "
              f"{total * 1e3:.1f} | {slow} | {in_flush} | {max(t['flush'][1] for t in traced) * 1e3:.1f} |")


if __name__ == "__main__":
    sys.exit(main())
