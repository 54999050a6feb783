"""What every served benchmark shares: the runner's ``Context`` (``python -m bench`` 's options and
the rows it prints) and one closed-loop load run against a started server, with the medians of
several."""

from __future__ import annotations

import os
import statistics
from dataclasses import dataclass, field

from bench.generate import ClusterSpec
from bench.load import drive
from bench.server import Server, busy_cpu_seconds

LOAD_SERVERS = ("bare", "handwritten", "handwritten-wsgi", "service")
#: what --servers may name: the default set plus the stricter floor (bench/bare_wsgi.socket_app)
ALL_SERVERS = ("bare", "bare-socket", "handwritten", "handwritten-wsgi", "service")


@dataclass
class Context:
    quick: bool = False
    runs: int = 3
    seconds: float = 4.0
    procs: int = 2
    workers: int = 2
    threads: int = 4
    servers: tuple[str, ...] = LOAD_SERVERS
    #: another checkout whose service runs beside this one's as the server ``baseline`` (the code
    #: before a change, measured in the same run: ``python -m bench --baseline DIR``)
    baseline: str | None = None
    rows: list[dict] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def spec(self, nodes: int, pods: int, **kw) -> ClusterSpec:
        if self.quick:
            return ClusterSpec(nodes=min(nodes, 6), pods_per_node=min(pods, 4), pending_jobs=2, tasks_per_pending_job=2, **kw)
        return ClusterSpec(nodes=nodes, pods_per_node=pods, **kw)

    def emit(self, row: dict) -> None:
        self.rows.append(row)
        print(format_row(row), flush=True)


def format_row(row: dict) -> str:
    parts = []
    for key, value in row.items():
        if isinstance(value, float):
            value = f"{value:.3f}" if abs(value) < 100 else f"{value:.0f}"
        parts.append(f"{key}={value}")
    return "  " + " ".join(parts)


# --- measuring a server under load ------------------------------------------------------------

def load_run(server: Server, calls, ctx: Context, concurrency: int, max_calls: int | None = None,
             max_idle: int | None = None, burst: int | None = None) -> dict:
    """One closed-loop run: ``ctx.seconds`` of load, or ``max_calls`` calls when given; with
    ``max_idle`` the callers share connections of which at most that many stay idle.

    ``other_cpu_pct``: CPU the rest of the machine used meanwhile (other people's processes),
    in % of all cores: figures taken while it is high are noisy."""
    cpu0, busy0 = server.cpu_seconds(), busy_cpu_seconds()
    result = drive(server.host, server.port, calls, concurrency=concurrency, seconds=ctx.seconds if max_calls is None else 3600.0,
                   procs=ctx.procs if concurrency > 1 else 1, max_calls=max_calls, max_idle=max_idle, burst=burst)
    server_cpu = server.cpu_seconds() - cpu0
    other = busy_cpu_seconds() - busy0 - server_cpu - result.client_cpu
    verb = calls[0][0]
    s = result.summary(verb)
    n = max(result.requests, 1)
    return {"rps": result.rate(), "p50_ms": s["p50"] * 1e3, "p90_ms": s["p90"] * 1e3, "p99_ms": s["p99"] * 1e3,
            "max_ms": s["max"] * 1e3, "errors": sum(result.errors.values()), "n": result.requests,
            "server_cpu_ms": server_cpu / n * 1e3, "client_cpu_ms": result.client_cpu / n * 1e3,
            "other_cpu_pct": max(other, 0.0) / (result.wall * (os.cpu_count() or 1)) * 100,
            "new_conn_per_call": result.connections / n}


def medians(runs: list[dict]) -> dict:
    out = {}
    for key in runs[0]:
        values = [r[key] for r in runs]
        out[key] = max(values) if key in ("errors", "max_ms") else statistics.median(values)
    out["n"] = sum(r["n"] for r in runs)
    return out
