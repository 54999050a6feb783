"""What node reuse (``wire/node_reuse.py``) costs and saves per predicate decode, in-process.

Method (printed): ``decode_predicate`` alone (no HTTP, no evaluation) on Volcano-shaped predicate
bodies of ``--nodes`` nodes x ``--pods`` pods, the benchmark policy's read set, process CPU
time per call, median of ``--rounds`` interleaved rounds of one pass over the bodies:

* ``off``: ``node_reuse_bytes`` 0, every body decoded whole (the code before node reuse);
* ``miss``: reuse on, the kept nodes dropped before each round and every node seen once per
  round: each call splits the body, decodes the node part and keeps it (a node's first call of a
  cycle, or a node that changed);
* ``hit``: reuse on, every node kept by the round before: each call compares the node's bytes
  with the kept ones and decodes only the task (the next tasks of a cycle on unchanged nodes).

``--verb prioritize``: ``decode_prioritize`` of the all-nodes body instead, ``off`` as above,
``miss`` with nothing kept (the walk is not tried), ``hit`` after the ``--nodes`` predicate bodies
kept every node (what a task's predicates leave before its prioritize). ``--streamed``: the body
through ``wire.prioritize_stream`` as if it arrived 2 MiB at a time (what the service does from
24 MiB), from a fresh copy each call (the copy not timed); the bound is raised to hold every node.

``--verb onSessionOpen``: the cluster's snapshot through ``wire.open_stream`` as if it arrived 2 MiB
at a time (what the service does from 4 MiB), from a fresh copy each call (not timed); ``off``
(``node_reuse_bytes`` 0), ``miss`` (nothing kept: the open keeps its jobs), ``nodes`` (after the
``--nodes`` predicate bodies, the jobs forgotten) and ``hit`` (the nodes and the last open's jobs
kept: the next cycle's open on an unchanged cluster).

``python -m bench.cpu.node_reuse [--verb predicate|prioritize|onSessionOpen] [--streamed] [--nodes 50] [--pods 20] [--rounds 9]``
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

from bench.generate import Bodies, Cluster, ClusterSpec
from bench.server import POLICY_DIR
from policy_extender.policyset.compile import load_directories
from policy_extender.wire import decode, node_reuse, open_stream, prioritize_stream


def per_call(bodies: list[bytes], reads, decoder=decode.decode_predicate) -> float:
    t0 = time.process_time()
    for body in bodies:
        decoder(body, reads)
    return (time.process_time() - t0) / len(bodies)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.cpu.node_reuse", description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=50)
    parser.add_argument("--pods", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--verb", choices=("predicate", "prioritize", "onSessionOpen"), default="predicate")
    parser.add_argument("--streamed", action="store_true", help="prioritize decoded as it arrives")
    args = parser.parse_args(argv)
    reads = load_directories([POLICY_DIR]).reads
    cluster = Bodies(Cluster(ClusterSpec(nodes=args.nodes, pods_per_node=args.pods)))
    bodies = [cluster.predicate(n, 0, 0) for n in range(args.nodes)]
    size = statistics.median(len(b) for b in bodies)
    results: dict[str, list[float]] = {"off": [], "miss": [], "hit": []}
    if args.verb == "onSessionOpen":
        results = {"off": [], "miss": [], "nodes": [], "hit": []}
    cap = node_reuse.DEFAULT_MAX_BYTES
    if args.verb == "onSessionOpen":
        body = cluster.snapshot()

        def opened(bodies_: list[bytes], reads_) -> float:
            buffer = bytearray(bodies_[0])
            t0 = time.process_time()
            open_stream.decode_streamed(buffer, reads_)
            return time.process_time() - t0
        print(f"method: bench/cpu/node_reuse.py: wire.open_stream only, one snapshot of {args.nodes} nodes x "
              f"{args.pods} pods ({len(body) / 1e6:.1f} MB) fed 2 MiB at a time, bench/policies read set, process "
              f"CPU per call, median of {args.rounds} interleaved rounds (off; miss: nothing kept; nodes: after "
              f"the {args.nodes} predicates; hit: and after an open); nproc {os.cpu_count()}, load {open('/proc/loadavg').read().split()[0]}",
              flush=True)
        for _ in range(args.rounds + 1):
            node_reuse.configure(0)
            off = opened([body], reads)
            node_reuse.configure(cap)
            open_stream._forget_jobs()
            miss = opened([body], reads)
            per_call(bodies, reads)  # the cycle's predicates keep its nodes
            open_stream._forget_jobs()
            nodes = opened([body], reads)
            hit = opened([body], reads)
            for name, value in (("off", off), ("miss", miss), ("nodes", nodes), ("hit", hit)):
                results[name].append(value)
    elif args.verb == "prioritize":
        body = cluster.prioritize()
        if args.streamed:
            cap = max(cap, 2 * len(body))

            def streamed(bodies_: list[bytes], reads_) -> float:
                buffer = bytearray(bodies_[0])
                t0 = time.process_time()
                prioritize_stream.decode_streamed(buffer, reads_)
                return time.process_time() - t0
        else:
            def streamed(bodies_: list[bytes], reads_) -> float:
                return per_call(bodies_, reads_, decode.decode_prioritize)
        print(f"method: bench/cpu/node_reuse.py: decode_prioritize only, one body of {args.nodes} nodes x {args.pods} "
              f"pods ({len(body) / 1e6:.1f} MB){', streamed' if args.streamed else ''}, bench/policies read set, process CPU per call, median of "
              f"{args.rounds} interleaved rounds (off; miss: nothing kept; hit: after the {args.nodes} predicates); "
              f"nproc {os.cpu_count()}, load {open('/proc/loadavg').read().split()[0]}", flush=True)
        for _ in range(args.rounds + 1):
            node_reuse.configure(0)
            off = streamed([body], reads)
            node_reuse.configure(cap)
            miss = streamed([body], reads)
            per_call(bodies, reads)  # the task's predicates keep its nodes
            hit = streamed([body], reads)
            for name, value in (("off", off), ("miss", miss), ("hit", hit)):
                results[name].append(value)
    else:
        print(f"method: bench/cpu/node_reuse.py: decode_predicate only, {args.nodes} bodies of {args.nodes} nodes x "
              f"{args.pods} pods (median {size / 1e3:.0f} KB), bench/policies read set, process CPU per call, "
              f"median of {args.rounds} interleaved rounds (off, miss, hit); nproc {os.cpu_count()}, load "
              f"{open('/proc/loadavg').read().split()[0]}", flush=True)
        for _ in range(args.rounds + 1):  # the first round warms the decoders up and is not counted
            node_reuse.configure(0)
            off = per_call(bodies, reads)
            node_reuse.configure(cap)
            miss = per_call(bodies, reads)
            hit = per_call(bodies, reads)
            for name, value in (("off", off), ("miss", miss), ("hit", hit)):
                results[name].append(value)
    medians = {name: statistics.median(values[1:]) for name, values in results.items()}
    for name, value in medians.items():
        print(f"  {name:5s} {value * 1e6:10.1f} us per call   ({value / medians['off']:.2f}x off)")
    print(f"  kept after a pass: {node_reuse.kept_bytes() / 1e6:.1f} MB for {args.nodes} nodes "
          f"(cap {cap / 2**20:.0f} MiB per worker)")
    if cap != node_reuse.DEFAULT_MAX_BYTES:
        node_reuse.configure(node_reuse.DEFAULT_MAX_BYTES)  # the process's default again


if __name__ == "__main__":
    main()
