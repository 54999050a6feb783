"""The engine's CPU per predicate call against the hand-written WSGI app, in randomized paired
blocks in one process: the figure for "within +10 % of the hand-written baseline".

Why another in-process bench. ``bench.cpu.inprocess`` times rounds of 1,000 calls per app, one app
after the other; on this shared VM the host's speed moves by 30 % within a second, so two rounds
60-160 ms apart differ by more than the engine costs (per-round ratios from 0.83 to 1.82 in one
run). ``bench.cpu.instructions`` counts instructions, which do not move, but a Python bytecode costs
several times an average instruction of the msgspec decode or the digest, so its ratio (1.06)
understates the ratio in time.

Method: one process builds the service (``bench.cpu.inprocess.service_app``, a session open on the
same cluster) and the hand-written WSGI app (``bench.handwritten.wsgi_app``), the latter reading
with the service's read set, so that both decode with the same decoders and share this process's
kept nodes (``wire.node_reuse`` keeps the nodes of one read set: with two sets, each app would
throw the other's away and decode every node whole). Both are warmed on the same calls. Then
each round runs a block of ``--block`` calls (50 nodes x 20 pods, 4 tasks x 50 nodes = 200
predicate bodies of about 137 KB, cycled) on each app, in a random order, both blocks on the same
bodies, timed with the process's CPU clock (every thread: the tally's and the metrics' flushers
fold the calls in their own threads, and that work is the service's too). Printed: the ratio of
the summed CPU (service / hand-written), the median of the per-round ratios with their middle
half, and the engine's extra per call. Pin it to one core (``taskset -c 1``).

``python -m bench.cpu.paired [--rounds N] [--block N]``
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time

from bench import handwritten
from bench.generate import Bodies, Cluster, ClusterSpec
from bench.cpu.inprocess import call, close, service_app
from bench.scenarios import predicate_calls
from policy_extender.wire import node_reuse

APPS = ("service", "handwritten-wsgi")


def measure(rounds: int, block: int, seed: int = 0) -> tuple[dict[str, list[float]], int]:
    """(CPU seconds per call of each block, by app, in round order; nodes decoded during the
    rounds rather than taken from the kept ones: 0 when both apps share them, as they should)."""
    bodies = Bodies(Cluster(ClusterSpec(nodes=50, pods_per_node=20)))
    calls = predicate_calls(bodies)
    order = random.Random(seed)
    saved_reads = handwritten.READS
    with tempfile.TemporaryDirectory() as tmp:
        service = service_app(tmp)
        try:
            call(service, "/onSessionOpen", bodies.snapshot())
            call(service, *calls[0][1:])
            # the service's read set (equal in what it decodes): one set of kept nodes for both
            handwritten.READS = service.service.decided_with[0].reads
            apps = {"service": service, "handwritten-wsgi": handwritten.wsgi_app}
            for app in apps.values():
                for k in range(2 * len(calls)):
                    call(app, *calls[k % len(calls)][1:])
            per_call: dict[str, list[float]] = {name: [] for name in APPS}
            decoded = node_reuse.counts["decoded"] + node_reuse.counts["whole"]
            start = 0
            for _ in range(rounds):
                names = list(APPS)
                order.shuffle(names)
                for name in names:
                    app = apps[name]
                    t0 = time.process_time()
                    for k in range(start, start + block):
                        call(app, *calls[k % len(calls)][1:])
                    per_call[name].append((time.process_time() - t0) / block)
                start += block
            decoded = node_reuse.counts["decoded"] + node_reuse.counts["whole"] - decoded
        finally:
            handwritten.READS = saved_reads
            close(service)
    return per_call, decoded


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.cpu.paired", description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=300)
    parser.add_argument("--block", type=int, default=100, help="calls per app per round")
    parser.add_argument("--seed", type=int, default=0, help="of the random order of each round")
    args = parser.parse_args(argv)
    per_call, decoded = measure(args.rounds, args.block, args.seed)
    service, hand = per_call["service"], per_call["handwritten-wsgi"]
    ratios = sorted(s / h for s, h in zip(service, hand))
    quarter = len(ratios) // 4
    total = sum(service) / sum(hand)
    extra = (sum(service) - sum(hand)) / len(service) * 1e6
    print(f"predicate, 50 nodes x 20 pods/node, {args.rounds} rounds x {args.block} calls per app, "
          f"randomized paired blocks in one process, process CPU:")
    print(f"  service           {statistics.median(service) * 1e6:6.1f} us per call (median block)")
    print(f"  handwritten-wsgi  {statistics.median(hand) * 1e6:6.1f} us per call (median block)")
    print(f"  service / handwritten-wsgi: {total:.3f} summed (engine extra {extra:.1f} us per call); "
          f"per round median {statistics.median(ratios):.3f} (middle half {ratios[quarter]:.3f}-"
          f"{ratios[-1 - quarter]:.3f})")
    print(f"  nodes decoded whole during the rounds (not taken from the kept ones): {decoded}")


if __name__ == "__main__":
    main()
