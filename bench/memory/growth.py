"""How cost grows with the cluster: one table, a least-squares slope per row.

Rows (all against a real ``policy-extender serve``, gunicorn 2 workers x 4 threads, the benchmark
policy ``bench/policies/gpu.policy``, SQLite session store, the service's **default** body limits
``onSessionOpen=1024MiB,prioritize=256MiB`` unless a row says otherwise; Volcano-shaped bodies from
``bench/generate.py``; client on the same host over loopback):

* **predicate CPU per call vs pods per node** (50 nodes x 20 / 30 / 100 pods): 16 concurrent
  keep-alive connections for ``--seconds`` per run, the server's CPU (master + workers, from
  ``/proc``) divided by the calls answered; the pod sizes' runs are interleaved on one server,
  ``--runs`` rounds, median per size. The bare floor (``bench.bare_wsgi.socket_app``: reads the
  body the service's way, answers a constant) is measured in the same rounds.
* **prioritize vs nodes** (50 / 500 / 2,000 nodes x 30 pods, every node in the body): one call
  at a time on one keep-alive connection, latency from the first byte sent to the last byte of
  the answer, after one warm-up call; sizes interleaved, p50 and p99 (nearest rank) over all
  calls of a size. The service is also sent each body with one leading space (``whole``): the
  same bytes but for one, which the service does not recognise as Volcano's compact layout and so
  decodes only after the last byte, as before it decoded prioritize while it arrives
  (``wire/prioritize_stream.py``); interleaved with the others, so streamed and whole are
  compared in one run. A body over the default prioritize limit is first sent to the default server
  (headers only: it must answer 413 before reading the body), then measured on a second server
  started with ``--body-limits prioritize=1GiB``.
* **onSessionOpen time and RSS vs nodes** (50 / 500 / 1,000 nodes x 30 pods): the snapshot is
  streamed from a file on a new connection per open, timed from connect to the last byte of the
  answer, ``--opens`` opens per size after one warm-up; RSS: each worker's ``VmHWM`` is reset
  before the open (``/proc/PID/clear_refs``), ``peak growth`` = max over workers of ``VmHWM`` after
  minus ``VmRSS`` before; ``held`` = the workers' summed ``VmRSS`` after the open and the close,
  minus before the first open, read once two readings 0.1 s apart agree (the answer is sent
  before the body is unmapped); ``kept map`` = the part of it that is the workers' kept body maps
  (``keep_body_maps``: ``LazyFree`` in ``/proc/PID/smaps_rollup``, RSS the kernel takes back
  when memory runs short). A worker that received an open before receives the next into its
  kept map, so the peak growth of the measured opens no longer includes the body.

Slopes are least-squares fits of the row's y over its x (every size's median), with units; the
table also says where a size crosses a limit: a body limit, or Volcano's default
``extender.httpTimeout`` of 1 s (over it, Volcano gives up on the call).

``python -m bench.memory.growth [--parts predicate,prioritize,open] [--runs 3] [--seconds 3] [--nodes 50,500,2000] [--quick]``
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

from bench.generate import Bodies, Cluster, ClusterSpec, write_snapshot
from bench.load import Connection
from bench.runs import Context, load_run
from bench.scenarios import predicate_calls
from bench.server import Server, busy_cpu_seconds, lazyfree_kb, reset_peak_rss, status_kb

MIB = 1 << 20
DEFAULT_LIMITS = {"onSessionOpen": 1024 * MIB, "prioritize": 256 * MIB}
DEFAULT_FLAGS = ("--body-limits", "onSessionOpen=1024MiB,prioritize=256MiB")
HTTP_TIMEOUT = 1.0   # Volcano's default extender.httpTimeout, seconds


def fit(points: list[tuple[float, float]]) -> tuple[float, float]:
    """Least-squares (slope, intercept) of y over x."""
    mx = statistics.fmean(x for x, _ in points)
    my = statistics.fmean(y for _, y in points)
    sxx = sum((x - mx) ** 2 for x, _ in points)
    slope = sum((x - mx) * (y - my) for x, y in points) / sxx if sxx else 0.0
    return slope, my - slope * mx


def nearest_rank(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, int(-(-q * len(ordered) // 1)) - 1))]


def load() -> str:
    return f"{os.getloadavg()[0]:.1f}"


# --- predicate ----------------------------------------------------------------------------------

def predicate_part(args, rows: list[dict]) -> None:
    pods_sizes = (4, 6) if args.quick else (20, 30, 100)
    calls = {p: predicate_calls(Bodies(Cluster(ClusterSpec(nodes=6 if args.quick else 50, pods_per_node=p))))
             for p in pods_sizes}
    ctx = Context(quick=args.quick, runs=args.runs, seconds=args.seconds)
    print(f"\n== predicate: 16 connections, {args.seconds:g} s per run, {args.runs} rounds, sizes interleaved "
          f"(load average {load()})", flush=True)
    results = {(kind, p): [] for kind in ("bare-socket", "service") for p in pods_sizes}
    servers = {"bare-socket": Server("bare-socket").start(), "service": Server("service", extra=DEFAULT_FLAGS).start()}
    try:
        for server in servers.values():
            for p in pods_sizes:
                load_run(server, calls[p], ctx, 16, max_calls=200)        # warm-up
        for _ in range(args.runs):
            for p in pods_sizes:
                for kind, server in servers.items():
                    results[(kind, p)].append(load_run(server, calls[p], ctx, 16))
    finally:
        for server in servers.values():
            server.stop()
    for p in pods_sizes:
        body = statistics.median(len(c[2]) for c in calls[p])
        row = {"part": "predicate", "pods": p, "body_kb": body / 1e3}
        for kind in servers:
            runs = results[(kind, p)]
            row[f"{kind}_cpu_ms"] = statistics.median(r["server_cpu_ms"] for r in runs)
            row[f"{kind}_p50_ms"] = statistics.median(r["p50_ms"] for r in runs)
            row[f"{kind}_p99_ms"] = statistics.median(r["p99_ms"] for r in runs)
            row[f"{kind}_rps"] = statistics.median(r["rps"] for r in runs)
            row[f"{kind}_errors"] = sum(r["errors"] for r in runs)
            row["other_cpu_pct"] = max(row.get("other_cpu_pct", 0), *(r["other_cpu_pct"] for r in runs))
        rows.append(row)
        print(f"  {p} pods/node ({body / 1e3:.0f} KB): service {row['service_cpu_ms']:.3f} ms CPU/call "
              f"(p50 {row['service_p50_ms']:.1f} ms, p99 {row['service_p99_ms']:.1f} ms, {row['service_rps']:.0f}/s); "
              f"bare floor {row['bare-socket_cpu_ms']:.3f} ms; other CPU up to {row['other_cpu_pct']:.0f} %", flush=True)


# --- prioritize ---------------------------------------------------------------------------------

def refused_before_reading(server: Server, size: int) -> int:
    """Sends only the headers of a ``size``-byte prioritize call; the status the server answers."""
    conn = Connection(server.host, server.port, timeout=30)
    conn.sock = conn._connect()
    conn.sock.sendall(f"POST /prioritize HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                      f"Content-Length: {size}\r\n\r\n".encode())
    status, _ = conn._read_response()
    conn.close()
    return status


def prioritize_part(args, rows: list[dict]) -> None:
    sizes = (4, 6) if args.quick else tuple(int(n) for n in args.nodes.split(","))
    pods = 4 if args.quick else 30
    counts = {n: (2 if args.quick else (30 if n <= 50 else 40 if n <= 500 else 4)) for n in sizes}
    print(f"\n== prioritize: {pods} pods/node, one call at a time, calls per size {counts} (load average {load()})", flush=True)
    bodies = {}
    for n in sizes:
        t0 = time.perf_counter()
        bodies[n] = Bodies(Cluster(ClusterSpec(nodes=n, pods_per_node=pods))).prioritize()
        print(f"  {n} nodes: body {len(bodies[n]) / 1e6:.1f} MB ({len(bodies[n]) / MIB:.1f} MiB) generated in "
              f"{time.perf_counter() - t0:.1f} s", flush=True)
    over = [n for n in sizes if len(bodies[n]) > DEFAULT_LIMITS["prioritize"]]
    servers = {"default": Server("service", extra=DEFAULT_FLAGS).start()}
    refused = {n: refused_before_reading(servers["default"], len(bodies[n])) for n in over}
    for n, status in refused.items():
        print(f"  {n} nodes: {len(bodies[n]) / MIB:.0f} MiB is over the default 256 MiB prioritize limit: "
              f"the default server answered {status} from the headers", flush=True)
    if over:
        servers["raised"] = Server("service", extra=("--body-limits", "onSessionOpen=1024MiB,prioritize=1GiB")).start()
    servers["floor"] = Server("bare-socket").start()
    kinds = ("floor", "service", "whole")
    where = {(kind, n): servers["floor"] if kind == "floor" else servers["raised" if n in over else "default"]
             for kind in kinds for n in sizes}
    sent = {(kind, n): b" " + bodies[n] if kind == "whole" else bodies[n] for kind in kinds for n in sizes}
    conns = {id(s): Connection(s.host, s.port, timeout=120) for s in servers.values()}
    latencies: dict[tuple, list[float]] = {key: [] for key in where}
    cpu: dict[tuple, list[float]] = {key: [] for key in where}
    statuses: dict[tuple, set] = {key: set() for key in where}
    busy0, wall0 = busy_cpu_seconds(), time.perf_counter()
    ours = 0.0
    try:
        for key, server in where.items():
            conns[id(server)].request("/prioritize", sent[key])     # warm-up
        for k in range(max(counts.values())):
            for n in sizes:
                for kind in kinds:
                    if k >= counts[n]:
                        continue
                    server = where[(kind, n)]
                    c0 = server.cpu_seconds()
                    t0 = time.perf_counter()
                    status, _ = conns[id(server)].request("/prioritize", sent[(kind, n)])
                    latencies[(kind, n)].append(time.perf_counter() - t0)
                    cpu[(kind, n)].append(server.cpu_seconds() - c0)
                    ours += cpu[(kind, n)][-1]
                    statuses[(kind, n)].add(status)
    finally:
        for s in servers.values():
            s.stop()
    other_pct = max(busy_cpu_seconds() - busy0 - ours, 0.0) / ((time.perf_counter() - wall0) * (os.cpu_count() or 1)) * 100
    print(f"  other CPU (everything but the servers, the client included) {other_pct:.0f} %, load average {load()}", flush=True)
    for n in sizes:
        v, f, w = latencies[("service", n)], latencies[("floor", n)], latencies[("whole", n)]
        row = {"part": "prioritize", "nodes": n, "body_mb": len(bodies[n]) / 1e6, "calls": len(v),
               "p50_ms": statistics.median(v) * 1e3, "p99_ms": nearest_rank(v, 0.99) * 1e3, "max_ms": max(v) * 1e3,
               "server_cpu_ms": statistics.median(cpu[("service", n)]) * 1e3, "statuses": sorted(statuses[("service", n)]),
               "floor_p50_ms": statistics.median(f) * 1e3, "floor_cpu_ms": statistics.median(cpu[("floor", n)]) * 1e3,
               "whole_p50_ms": statistics.median(w) * 1e3, "whole_p99_ms": nearest_rank(w, 0.99) * 1e3,
               "whole_cpu_ms": statistics.median(cpu[("whole", n)]) * 1e3,
               "over_limit": n in over, "default_answer": refused.get(n, 200), "other_cpu_pct": other_pct}
        row.update(breakdown(bodies[n]))
        rows.append(row)
        print(f"  {n} nodes ({row['body_mb']:.1f} MB): p50 {row['p50_ms']:.0f} ms, p99 {row['p99_ms']:.0f} ms, "
              f"max {row['max_ms']:.0f} ms, server CPU {row['server_cpu_ms']:.0f} ms/call, statuses {row['statuses']}"
              + (" (raised limit)" if n in over else "")
              + f"; decoded whole (not while arriving): p50 {row['whole_p50_ms']:.0f} ms, p99 {row['whole_p99_ms']:.0f} ms, "
              f"CPU {row['whole_cpu_ms']:.0f} ms; floor (bare-socket) p50 {row['floor_p50_ms']:.0f} ms, CPU {row['floor_cpu_ms']:.0f} ms; in-process: decode "
              f"{row['decode_ms']:.1f} ms, evaluate {row['evaluate_ms']:.1f} ms, encode {row['encode_ms']:.2f} ms", flush=True)


def breakdown(body: bytes) -> dict:
    """In this process, median of 5: the service's pruned decode, the policy's prioritize over
    the decoded nodes, and the answer's encoding (no session)."""
    from policy_extender.policyset.compile import load_directories
    from policy_extender.wire import decode, encode
    from policy_extender.wire.session_views import NO_SESSION
    from bench.server import POLICY_DIR
    ps = load_directories([POLICY_DIR])
    times: dict[str, list[float]] = {"decode_ms": [], "evaluate_ms": [], "encode_ms": []}
    for _ in range(5):
        t0 = time.perf_counter()
        request = decode.decode_prioritize(body, ps.reads)
        t1 = time.perf_counter()
        decision = ps.prioritize(request.task, request.nodes, NO_SESSION)
        t2 = time.perf_counter()
        encode.prioritize(decision, request.nodes)
        t3 = time.perf_counter()
        for key, value in zip(times, (t1 - t0, t2 - t1, t3 - t2)):
            times[key].append(value * 1e3)
        del request, decision
    return {key: statistics.median(v) for key, v in times.items()}


# --- onSessionOpen ------------------------------------------------------------------------------

def open_part(args, rows: list[dict]) -> None:
    sizes = (4, 6) if args.quick else (50, 500, 1000)
    pods = 4 if args.quick else 30
    opens = 1 if args.quick else args.opens
    print(f"\n== onSessionOpen: {pods} pods/node, {opens} opens per size after a warm-up, new connection each "
          f"(load average {load()})", flush=True)
    with tempfile.TemporaryDirectory(prefix="bench-growth-") as tmp:
        for n in sizes:
            path = os.path.join(tmp, f"snapshot-{n}.json")
            t0 = time.perf_counter()
            with open(path, "wb") as f:
                size = write_snapshot(Cluster(ClusterSpec(nodes=n, pods_per_node=pods)), f)
            print(f"  {n} nodes: snapshot {size / 1e6:.1f} MB written in {time.perf_counter() - t0:.1f} s", flush=True)
            with Server("service", extra=(*DEFAULT_FLAGS, "--session-store", f"sqlite:{tmp}/s-{n}.sqlite3")) as server:
                workers = server.worker_pids()
                idle = sum(status_kb(pid, "VmRSS") for pid in workers)
                _open(server, path)                                            # warm-up
                times, growth, statuses = [], [], set()
                busy0, cpu0, wall0 = busy_cpu_seconds(), server.cpu_seconds(), time.perf_counter()
                for _ in range(opens):
                    before = {}
                    for pid in workers:
                        reset_peak_rss(pid)
                        before[pid] = status_kb(pid, "VmRSS")
                    seconds, status = _open(server, path)
                    times.append(seconds)
                    statuses.add(status)
                    growth.append(max(status_kb(pid, "VmHWM") - before[pid] for pid in workers))
                held = settled_rss(workers) - idle
                kept = sum(lazyfree_kb(pid) for pid in workers)
                other = busy_cpu_seconds() - busy0 - (server.cpu_seconds() - cpu0)
                other_pct = max(other, 0.0) / ((time.perf_counter() - wall0) * (os.cpu_count() or 1)) * 100
            os.remove(path)
            row = {"part": "open", "nodes": n, "body_mb": size / 1e6, "median_s": statistics.median(times),
                   "max_s": max(times), "peak_growth_mb": statistics.median(growth) / 1024 * 1.048576,
                   "held_mb": held / 1024 * 1.048576, "kept_mb": kept / 1024 * 1.048576, "statuses": sorted(statuses), "other_cpu_pct": other_pct,
                   "over_limit": size > DEFAULT_LIMITS["onSessionOpen"]}
            rows.append(row)
            print(f"  {n} nodes ({size / 1e6:.0f} MB): open median {row['median_s'] * 1e3:.0f} ms, max {row['max_s'] * 1e3:.0f} ms, "
                  f"peak RSS growth {row['peak_growth_mb']:.0f} MB ({row['peak_growth_mb'] / row['body_mb']:.2f}x body), "
                  f"workers hold {row['held_mb']:+.0f} MB after ({row['kept_mb']:.0f} MB of it kept body maps, "
                  f"lazily freed); statuses {row['statuses']}; other CPU {other_pct:.0f} %", flush=True)


def settled_rss(workers: list[int], timeout: float = 3.0) -> int:
    """The workers' summed VmRSS (kB) once two readings 0.1 s apart agree: the answer to an open
    is sent before its mapped body is unmapped (``web.dispatch.AnswerThenRelease``), so a reading
    taken right after the answer can still count a 538 MB body."""
    last, deadline = None, time.monotonic() + timeout
    while True:
        now = sum(status_kb(pid, "VmRSS") for pid in workers)
        if now == last or time.monotonic() > deadline:
            return now
        last = now
        time.sleep(0.1)


def _open(server: Server, path: str) -> tuple[float, int]:
    conn = Connection(server.host, server.port, timeout=300)
    t0 = time.perf_counter()
    status, _ = conn.request("/onSessionOpen", path)
    seconds = time.perf_counter() - t0
    conn.close()
    close = Connection(server.host, server.port, timeout=60)
    close.request("/onSessionClose", b"{}")
    close.close()
    return seconds, status


# --- the table ----------------------------------------------------------------------------------

def table(rows: list[dict]) -> list[str]:
    out = ["| row | sizes | figures (median per size) | fitted slope (least squares) | limits crossed |", "|---|---|---|---|---|"]
    pred = [r for r in rows if r["part"] == "predicate"]
    if pred:
        s, _ = fit([(r["pods"], r["service_cpu_ms"] * 1e3) for r in pred])
        sb, _ = fit([(r["pods"], r["bare-socket_cpu_ms"] * 1e3) for r in pred])
        skb, _ = fit([(r["body_kb"], r["service_cpu_ms"] * 1e3) for r in pred])
        out.append("| predicate: server CPU per call vs pods per node (50 nodes) | "
                   + ", ".join(f"{r['pods']} pods ({r['body_kb']:.0f} KB)" for r in pred) + " | "
                   + ", ".join(f"{r['service_cpu_ms']:.3f} ms (floor {r['bare-socket_cpu_ms']:.3f})" for r in pred) + " | "
                   + f"**{s:.1f} us per pod** ({skb:.2f} us per KB of body); bare floor {sb:.1f} us per pod | "
                   + "none: 16 MiB predicate limit, p99 " + ", ".join(f"{r['service_p99_ms']:.0f}" for r in pred) + " ms |")
    prio = [r for r in rows if r["part"] == "prioritize"]
    if prio:
        s, b = fit([(r["nodes"], r["p50_ms"]) for r in prio])
        smb, _ = fit([(r["body_mb"], r["p50_ms"]) for r in prio])
        per_node_mb = statistics.fmean(r["body_mb"] / r["nodes"] for r in prio)
        limit_nodes = DEFAULT_LIMITS["prioritize"] / 1e6 / per_node_mb
        timeout_nodes = (HTTP_TIMEOUT * 1e3 - b) / s if s > 0 else float("inf")
        crossed = []
        for r in prio:
            notes = []
            if r["over_limit"]:
                notes.append(f"{r['nodes']} nodes: {r['body_mb'] / 1.048576:.0f} MiB > 256 MiB default limit (answered {r['default_answer']}; measured with the limit raised)")
            if r["p99_ms"] > HTTP_TIMEOUT * 1e3:
                notes.append(f"{r['nodes']} nodes: p99 over the 1 s httpTimeout")
            crossed += notes
        crossed.append(f"fit: body limit at ~{limit_nodes:.0f} nodes, p50 = 1 s at ~{timeout_nodes:.0f} nodes")
        out.append("| prioritize: p50 vs nodes (30 pods/node, all nodes in the body) | "
                   + ", ".join(f"{r['nodes']} ({r['body_mb']:.0f} MB)" for r in prio) + " | "
                   + ", ".join(f"p50 {r['p50_ms']:.0f} / p99 {r['p99_ms']:.0f} ms (floor p50 {r['floor_p50_ms']:.0f})" for r in prio) + " | "
                   + f"**{s * 100:.1f} ms per 100 nodes** ({smb:.2f} ms per MB of body) | " + "; ".join(crossed) + " |")
    opens = [r for r in rows if r["part"] == "open"]
    if opens:
        s, b = fit([(r["nodes"], r["median_s"] * 1e3) for r in opens])
        sr, _ = fit([(r["nodes"], r["peak_growth_mb"]) for r in opens])
        sh, _ = fit([(r["nodes"], r["held_mb"]) for r in opens])
        sk, _ = fit([(r["nodes"], r["held_mb"] - r.get("kept_mb", 0.0)) for r in opens])
        timeout_nodes = (HTTP_TIMEOUT * 1e3 - b) / s if s > 0 else float("inf")
        per_node_mb = statistics.fmean(r["body_mb"] / r["nodes"] for r in opens)
        crossed = [f"{r['nodes']} nodes: {'median' if r['median_s'] > HTTP_TIMEOUT else 'max'} over the 1 s httpTimeout"
                   for r in opens if r["max_s"] > HTTP_TIMEOUT]
        crossed.append(f"fit: 1 s at ~{timeout_nodes:.0f} nodes; 1 GiB body limit at ~{DEFAULT_LIMITS['onSessionOpen'] / 1e6 / per_node_mb:.0f} nodes")
        out.append("| onSessionOpen: time vs nodes (30 pods/node) | "
                   + ", ".join(f"{r['nodes']} ({r['body_mb']:.0f} MB)" for r in opens) + " | "
                   + ", ".join(f"{r['median_s'] * 1e3:.0f} ms (max {r['max_s'] * 1e3:.0f})" for r in opens) + " | "
                   + f"**{s * 100:.0f} ms per 100 nodes** | " + "; ".join(crossed) + " |")
        out.append("| onSessionOpen: RSS vs nodes (30 pods/node) | " + ", ".join(str(r["nodes"]) for r in opens) + " | "
                   + ", ".join(f"peak +{r['peak_growth_mb']:.0f} MB, held {r['held_mb']:+.0f} MB"
                               + (f" ({r['kept_mb']:.0f} MB kept map)" if r.get("kept_mb") else "") for r in opens) + " | "
                   + f"**peak {sr * 100:.0f} MB per 100 nodes**; held after the cycle {sh * 100:.1f} MB per 100 nodes, "
                   + f"{sk * 100:.1f} without the kept maps | "
                   + "memory: see docs/operations.md Sizing |")
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.memory.growth", description=__doc__.splitlines()[0])
    parser.add_argument("--parts", default="predicate,prioritize,open")
    parser.add_argument("--runs", type=int, default=3, help="predicate rounds (default 3)")
    parser.add_argument("--seconds", type=float, default=3.0, help="seconds per predicate run (default 3)")
    parser.add_argument("--nodes", default="50,500,2000", help="prioritize sizes (default 50,500,2000)")
    parser.add_argument("--opens", type=int, default=3, help="timed opens per size (default 3)")
    parser.add_argument("--quick", action="store_true", help="tiny sizes, one short run: a smoke test, not figures")
    args = parser.parse_args(argv)
    if args.quick:
        args.runs, args.seconds = 1, 0.5
    print("method: " + __doc__.strip())
    print(f"machine: nproc {os.cpu_count()}, load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
    rows: list[dict] = []
    parts = {"predicate": predicate_part, "prioritize": prioritize_part, "open": open_part}
    for name in args.parts.split(","):
        parts[name](args, rows)
    print(f"\nload average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}\n")
    print("\n".join(table(rows)))


if __name__ == "__main__":
    main()
