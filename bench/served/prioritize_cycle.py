"""Prioritize as Volcano sends it within a cycle: after the same task's predicates on every node.

Method (printed): one Volcano-shaped cluster of ``--nodes`` x ``--pods`` (``bench/generate.py``),
served by real ``policy-extender serve`` instances (2 workers x 4 threads, ``bench/policies``,
prioritize limit raised to 1 GiB) and the bare floor (``bench.bare_wsgi.socket_app``: reads the
body with ``recv_into`` and answers ``{}``), started once; client on the same host over loopback.
For each pending task in turn, its predicate on every node goes out over 16 keep-alive
connections (Volcano's fan-out; which worker takes which is up to the kernel), then its
prioritize of every node on one more connection; only the prioritize is timed, from the
request's first byte to the answer's last. The servers take turns task by task. Variants:

* ``kept``: the service with ``node_reuse_bytes`` raised to hold every node (``--kept-bytes``,
  default 256 MiB): the prioritize takes each node its worker kept from a predicate (the same
  length and digest) while the body arrives (``wire/prioritize_stream.py``);
* ``default``: the service as shipped (``node_reuse_bytes`` 32 MiB);
* ``reuse-off``: ``node_reuse_bytes`` 0 (the code before node reuse: every node decoded);
* ``floor``: the bare floor, sent the same predicates and prioritize;
* ``baseline`` (with ``--baseline DIR``): the service as shipped from another checkout's code
  (the code before a change, measured in the same run).

The first ``--warmup`` tasks are not counted (each worker must have seen each node once: a node's
predicate reaches one of the 2 workers per task). p50 and p99 by nearest rank over the counted
tasks; each service's RSS (master + workers, ``/proc``) at the end.

``python -m bench.served.prioritize_cycle [--nodes 500] [--pods 30] [--tasks 24] [--warmup 4] [--baseline DIR]``
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

from bench.generate import Bodies, Cluster, ClusterSpec
from bench.memory.growth import load, nearest_rank
from bench.load import Connection, Pool
from bench.server import Server, status_kb

MIB = 1 << 20


def rss_mib(server: Server) -> float:
    """VmRSS of the server's master and workers, MiB."""
    return sum(status_kb(pid, "VmRSS") for pid in [server.proc.pid, *server.worker_pids()]) / 1024


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.served.prioritize_cycle", description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=500)
    parser.add_argument("--pods", type=int, default=30)
    parser.add_argument("--tasks", type=int, default=24, help="tasks counted per variant")
    parser.add_argument("--warmup", type=int, default=4)
    parser.add_argument("--kept-bytes", default="256MiB")
    parser.add_argument("--variants", default="kept,default,reuse-off,floor")
    parser.add_argument("--baseline", help="a checkout whose service runs as the 'baseline' variant")
    args = parser.parse_args(argv)
    variants = args.variants.split(",") + (["baseline"] if args.baseline else [])
    print(__doc__.split("Method (printed): ")[1].split("``python -m")[0].strip(), flush=True)
    spec = ClusterSpec(nodes=args.nodes, pods_per_node=args.pods, pending_jobs=max(args.tasks + args.warmup, 4))
    bodies = Bodies(Cluster(spec))
    t0 = time.perf_counter()
    first = bodies.prioritize(p=0)
    print(f"cluster {args.nodes} x {args.pods}: prioritize body {len(first) / 1e6:.1f} MB, predicate body "
          f"{len(bodies.predicate(0)) / 1e3:.0f} KB; generated in {time.perf_counter() - t0:.1f} s; nproc "
          f"{os.cpu_count()}, load average {load()}", flush=True)
    limits = ("--body-limits", "onSessionOpen=1024MiB,prioritize=1GiB")
    env = {"kept": args.kept_bytes, "default": None, "reuse-off": "0"}
    servers: dict[str, Server] = {}
    for name in variants:
        saved = os.environ.pop("POLICY_EXTENDER_NODE_REUSE_BYTES", None)
        if env.get(name):
            os.environ["POLICY_EXTENDER_NODE_REUSE_BYTES"] = env[name]
        try:
            servers[name] = Server("bare-socket" if name == "floor" else "service", extra=() if name == "floor" else limits,
                                   root=args.baseline if name == "baseline" else None).start()
        finally:
            os.environ.pop("POLICY_EXTENDER_NODE_REUSE_BYTES", None)
            if saved is not None:
                os.environ["POLICY_EXTENDER_NODE_REUSE_BYTES"] = saved
    pools = {name: Pool(s.host, s.port, 16) for name, s in servers.items()}
    conns = {name: Connection(s.host, s.port, timeout=120) for name, s in servers.items()}
    times: dict[str, list[float]] = {name: [] for name in servers}
    statuses: dict[str, set] = {name: set() for name in servers}
    try:
        for p in range(args.tasks + args.warmup):
            predicates = [("predicate", "/predicate", body) for body in bodies.predicates(p=p)]
            body = bodies.prioritize(p=p)
            order = list(servers)[p % len(servers):] + list(servers)[:p % len(servers)]
            for name in order:
                pools[name].map(predicates)
                t0 = time.perf_counter()
                status, _ = conns[name].request("/prioritize", body)
                elapsed = time.perf_counter() - t0
                statuses[name].add(status)
                if p >= args.warmup:
                    times[name].append(elapsed)
        rss = {name: rss_mib(s) for name, s in servers.items()}
        calls = {name: pool.result for name, pool in pools.items()}
    finally:
        for pool in pools.values():
            pool.close()
        for s in servers.values():
            s.stop()
    floor = statistics.median(times["floor"]) if times.get("floor") else None
    print(f"prioritize of {args.nodes} nodes after the task's {args.nodes} predicates, {args.tasks} tasks "
          f"(load average {load()}):")
    for name, values in times.items():
        p50 = statistics.median(values)
        ratio = f", {p50 / floor:.2f}x the floor" if floor and name != "floor" else ""
        print(f"  {name:10s} p50 {p50 * 1e3:6.1f} ms  p99 {nearest_rank(values, 0.99) * 1e3:6.1f} ms  "
              f"max {max(values) * 1e3:6.1f} ms{ratio}; statuses {sorted(statuses[name])}; RSS at the end "
              f"{rss[name]:.0f} MiB; predicates {len(calls[name].latencies.get('predicate', []))}, failed "
              f"{calls[name].errors.get('predicate', 0)}",
              flush=True)


if __name__ == "__main__":
    main()
