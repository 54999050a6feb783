"""How long onSessionOpen takes end to end, per cluster size: the figures behind ``extender.httpTimeout``.

Volcano's extender client uses one ``http.Client{Timeout: extender.httpTimeout}`` for every verb,
onSessionOpen included: the whole cluster snapshot must be sent, stored and answered within it.
For each cluster size this script writes a Volcano-shaped snapshot (``bench.generate``) to a temp
file, starts a real ``policy-extender serve`` (gunicorn, the shipped 2 workers x 4 threads, its own
SQLite store), and times ``--runs`` opens over loopback, each on a new connection, from connect
to the last byte of the answer (then an onSessionClose, not timed); one warm-up open first.
The machine's 1-minute load average is read before every open and the CPU used by other
processes meanwhile is reported, because the figures move with how busy the host is.

The recommended timeout is twice the slowest open measured, rounded up to a round duration:
the margin covers a busier host than the one measured and the connect and scheduling delays a
server cannot see.

``python -m bench.served.open_timeout [--sizes 50x20,200x20,500x30] [--runs 5]``
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

from bench.generate import Cluster, ClusterSpec, write_snapshot
from bench.load import Connection
from bench.server import Server, busy_cpu_seconds

#: Durations a recommendation is rounded up to (seconds).
ROUND = (0.1, 0.2, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0, 15.0, 20.0, 30.0)


def load_average() -> float:
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])


def recommended(slowest: float) -> float:
    """Twice ``slowest``, rounded up to a round duration."""
    wanted = 2 * slowest
    return next((d for d in ROUND if d >= wanted), wanted)


def duration(seconds: float) -> str:
    """A Go duration: 250ms, 1s, 1.5s."""
    return f"{seconds * 1000:.0f}ms" if seconds < 1 else f"{seconds:g}s"


def open_once(server: Server, path: str) -> tuple[float, int]:
    conn = Connection(server.host, server.port, timeout=120)
    t0 = time.perf_counter()
    status, _ = conn.request("/onSessionOpen", path)
    seconds = time.perf_counter() - t0
    conn.close()
    close = Connection(server.host, server.port, timeout=30)
    close.request("/onSessionClose", b"{}")
    close.close()
    return seconds, status


def measure(nodes: int, pods: int, runs: int, workers: int, threads: int) -> dict:
    cluster = Cluster(ClusterSpec(nodes=nodes, pods_per_node=pods))
    with tempfile.TemporaryDirectory(prefix="bench-open-") as tmp:
        path = os.path.join(tmp, "snapshot.json")
        t0 = time.perf_counter()
        with open(path, "wb") as f:
            size = write_snapshot(cluster, f)
        print(f"{nodes} nodes x {pods} pods: snapshot {size / 1e6:.1f} MB written in {time.perf_counter() - t0:.1f} s", flush=True)
        extra = ("--session-store", f"sqlite:{tmp}/sessions.sqlite3")
        with Server("service", workers, threads, extra=extra) as server:
            open_once(server, path)                                  # warm-up: decoders, first mmap
            times, loads, errors = [], [], 0
            cpu0, busy0, wall0 = server.cpu_seconds(), busy_cpu_seconds(), time.perf_counter()
            for _ in range(runs):
                loads.append(load_average())
                seconds, status = open_once(server, path)
                times.append(seconds)
                errors += status != 200
                print(f"  open {seconds * 1000:.0f} ms (status {status}, load average {loads[-1]:.2f})", flush=True)
            wall = time.perf_counter() - wall0
            other = busy_cpu_seconds() - busy0 - (server.cpu_seconds() - cpu0)
    return {"cluster": f"{nodes} x {pods}", "body_mb": size / 1e6, "median_s": statistics.median(times),
            "max_s": max(times), "runs": runs, "errors": errors, "load_min": min(loads), "load_max": max(loads),
            "other_cpu_pct": max(other, 0.0) / (wall * (os.cpu_count() or 1)) * 100,
            "recommended": recommended(max(times))}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.served.open_timeout", description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="50x20,200x20,500x30", help="NODESxPODS_PER_NODE, comma-separated")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--threads", type=int, default=4)
    args = parser.parse_args(argv)
    print(f"method: real `policy-extender serve` ({args.workers} workers x {args.threads} threads), loopback, "
          f"a new connection per open, {args.runs} timed opens after one warm-up; nproc {os.cpu_count()}", flush=True)
    rows = [measure(*map(int, size.split("x")), args.runs, args.workers, args.threads) for size in args.sizes.split(",")]
    print("\n| cluster (nodes x pods/node) | onSessionOpen body | open, median | open, max | load average (1 min) | other CPU | recommended httpTimeout |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['cluster']} | {r['body_mb']:.1f} MB | {r['median_s'] * 1000:.0f} ms | {r['max_s'] * 1000:.0f} ms | "
              f"{r['load_min']:.1f}-{r['load_max']:.1f} | {r['other_cpu_pct']:.0f} % | {duration(r['recommended'])} |"
              + (f" {r['errors']} errors" if r["errors"] else ""))


if __name__ == "__main__":
    main()
