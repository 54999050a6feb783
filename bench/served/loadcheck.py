"""Predicate throughput at N concurrent keep-alive clients, as Volcano's predicate workers call.

    python -m bench.served.loadcheck --port 8713 --body tests/samples/predicate.json

Each client thread keeps one HTTP/1.1 connection open (Go's transport does) and posts the body
in a loop for ``--seconds``; prints requests per second, latency percentiles and the statuses.
A benchmark prints figures; it asserts nothing. (The full suite lives in ``bench/``.)
"""

from __future__ import annotations

import argparse
import http.client
import statistics
import threading
import time
from collections import Counter


def client_loop(host: str, port: int, path: str, body: bytes, stop_at: float,
                latencies: list[float], statuses: Counter, lock: threading.Lock) -> None:
    conn = http.client.HTTPConnection(host, port, timeout=10)
    mine, seen = [], Counter()
    headers = {"Content-Type": "application/json"}
    while time.perf_counter() < stop_at:
        started = time.perf_counter()
        try:
            conn.request("POST", path, body=body, headers=headers)
            response = conn.getresponse()
            response.read()
            seen[response.status] += 1
            if response.getheader("Connection", "").lower() == "close":
                conn.close()
        except (OSError, http.client.HTTPException) as exc:
            seen[type(exc).__name__] += 1
            conn.close()
            conn = http.client.HTTPConnection(host, port, timeout=10)
        mine.append(time.perf_counter() - started)
    conn.close()
    with lock:
        latencies.extend(mine)
        statuses.update(seen)


def run(host: str, port: int, path: str, body: bytes, clients: int, seconds: float) -> dict:
    latencies: list[float] = []
    statuses: Counter = Counter()
    lock = threading.Lock()
    stop_at = time.perf_counter() + seconds
    threads = [threading.Thread(target=client_loop, args=(host, port, path, body, stop_at,
                                                          latencies, statuses, lock))
               for _ in range(clients)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    return summary(latencies, statuses, elapsed)


def summary(latencies: list[float], statuses: Counter, elapsed: float) -> dict:
    ordered = sorted(latencies) or [0.0]
    pick = lambda q: ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000  # noqa: E731
    return {"requests": len(latencies), "seconds": round(elapsed, 2),
            "per_second": round(len(latencies) / elapsed, 1),
            "p50_ms": round(pick(0.50), 2), "p90_ms": round(pick(0.90), 2),
            "p99_ms": round(pick(0.99), 2), "mean_ms": round(statistics.fmean(ordered) * 1000, 2),
            "statuses": dict(statuses)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8713)
    parser.add_argument("--path", default="/predicate")
    parser.add_argument("--body", required=True, help="request body file (JSON)")
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=10.0)
    args = parser.parse_args(argv)
    with open(args.body, "rb") as stream:
        body = stream.read()
    result = run(args.host, args.port, args.path, body, args.clients, args.seconds)
    print(f"{args.path} {len(body)} B body, {args.clients} keep-alive clients, {result['seconds']} s: "
          f"{result['per_second']} req/s; latency p50 {result['p50_ms']} ms, p90 {result['p90_ms']} ms, "
          f"p99 {result['p99_ms']} ms; statuses {result['statuses']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
