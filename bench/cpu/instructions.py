"""Instructions per predicate call, counted by valgrind's callgrind: the service's WSGI app, the
hand-written WSGI baseline (same body reading, same decoders) and the bare floor, in one process.

Wall-clock and CPU-clock figures of a 60 us call move by several microseconds from run to run on
a shared machine (``bench.cpu.inprocess`` needs paired rounds and still sees +-2 us). An instruction
count does not: the same code on the same bodies executes the same instructions whatever else the
machine does, so a change of 1 % in what a call executes is visible in one run. What it does not
see is time lost to cache misses and branch mispredictions (``--cache-sim`` adds a simulated
cache's miss counts); confirm a change in time with ``bench.cpu.inprocess`` as well.

Method: a child process runs under ``valgrind --tool=callgrind --separate-threads=yes
--dump-before=os_getppid``. It builds the same apps and bodies as ``bench.cpu.inprocess --session``
(50 nodes x 20 pods, 4 tasks x 50 nodes = 200 predicate bodies of about 137 KB, a session open
on the service, each app warmed with ``--warm`` calls), then for each app calls ``os.getppid()``
(a dump: the counters start from zero), makes ``--calls`` calls cycling the bodies, and calls it
again. The region between two dumps, of the main thread only, is that app's count; divided by
``--calls``, its instructions per call. Background threads (the tally and metrics flushers, the
session head watch) run on timers and are left out: they do per-second work, not per-call work,
and under valgrind's 50x slowdown they would fire 50x as often per call. The per-call half of
their work is counted, though: the metrics and the tally record a call by appending it to a list,
and fold the list into tallies when their flushers take it; the child stretches both flush
intervals to an hour and folds what waits (``metrics`` and the tally's ``take``) in the main
thread before each region ends, so the fold is in the count and the store and prometheus writes
(per flush, not per call) are not. The service draws request ids ``logs.ID_BATCH`` (1,024) at a
time, so a region of 1,024 calls draws exactly one batch: ``--calls`` defaults to that (a region
of 400 calls held a draw or none, and moved the count by 1.9k instructions per call).
``PYTHONHASHSEED=0``.

``python -m bench.cpu.instructions [--calls N] [--warm N] [--cache-sim] [--nodes N] [--pods N]``
"""

from __future__ import annotations

import argparse
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile

APPS = ("service", "handwritten-wsgi", "bare")


def child(calls: int, warm: int, nodes: int, pods: int) -> None:
    """Runs inside valgrind: one dump region per app, in the order of ``APPS``."""
    from bench import bare_wsgi, handwritten
    from bench.generate import Bodies, Cluster, ClusterSpec
    from bench.cpu.inprocess import call, close, service_app
    from bench.scenarios import predicate_calls

    from policy_extender import metrics

    bodies = Bodies(Cluster(ClusterSpec(nodes=nodes, pods_per_node=pods)))
    requests = predicate_calls(bodies)
    metrics.FLUSH_SECONDS = 3600.0  # the flushers sleep through the regions (module docstring)
    with tempfile.TemporaryDirectory() as tmp:
        service = service_app(tmp)
        service.service.tally.flush_seconds = 3600.0
        call(service, "/onSessionOpen", bodies.snapshot())
        apps = {"service": service, "handwritten-wsgi": handwritten.wsgi_app, "bare": bare_wsgi.app}
        for name in APPS:
            app = apps[name]
            for k in range(warm):
                _, path, body = requests[k % len(requests)]
                call(app, path, body)
            fold_waiting(service.service)                      # the warm-up's calls, outside the region
            os.getppid()                                      # dump: the region starts
            for k in range(calls):
                _, path, body = requests[k % len(requests)]
                call(app, path, body)
            fold_waiting(service.service)                      # the per-call half of the flushes
            os.getppid()                                      # dump: the region ends
        close(service)


def fold_waiting(service) -> None:
    """Fold the calls the metrics and the tally recorded but have not folded yet, in this
    thread, as their flushers would (without the writes that follow a fold)."""
    from policy_extender import metrics

    metrics._pending.take()
    service.tally.take()


def _events(path: str) -> dict[str, int]:
    """The event totals of one callgrind dump file."""
    names: list[str] = []
    with open(path) as f:
        for line in f:
            if line.startswith("events:"):
                names = line.split()[1:]
            elif line.startswith(("summary:", "totals:")):
                counts = [int(v) for v in line.split()[1:]]
                return dict(zip(names, counts + [0] * (len(names) - len(counts))))  # trailing zeros left out
    raise ValueError(f"{path}: no totals")


def measure(calls: int, warm: int, cache_sim: bool, nodes: int = 50, pods: int = 20) -> dict[str, dict[str, int]]:
    """App -> event -> count over ``calls`` calls (main thread)."""
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed (Debian: apt-get install valgrind)")
    with tempfile.TemporaryDirectory() as out:
        command = ["valgrind", "--tool=callgrind", "--separate-threads=yes", "--dump-before=os_getppid",
                   f"--cache-sim={'yes' if cache_sim else 'no'}", f"--callgrind-out-file={out}/cg.out",
                   sys.executable, "-m", "bench.cpu.instructions", "--child", "--calls", str(calls), "--warm", str(warm),
                   "--nodes", str(nodes), "--pods", str(pods)]
        env = {**os.environ, "PYTHONHASHSEED": "0"}
        done = subprocess.run(command, env=env, capture_output=True, text=True)
        if done.returncode != 0:
            raise SystemExit(f"the child under valgrind failed ({done.returncode}):\n{done.stderr[-3000:]}")
        # main thread: cg.out-01 (dumps .1, .2, ...); each region is the dump taken at its end
        main = sorted(glob.glob(f"{out}/cg.out.*-01"), key=lambda p: int(re.search(r"\.(\d+)-01$", p)[1]))
        if len(main) < 2 * len(APPS):
            raise SystemExit(f"expected {2 * len(APPS)} dumps of the main thread, found {len(main)}")
        # dump k (1-based) is taken before the k-th getppid: even dumps close the regions
        regions = [_events(main[2 * i + 1]) for i in range(len(APPS))]
    return dict(zip(APPS, regions))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.cpu.instructions", description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=1024,
                        help="calls per app in the counted region (a multiple of logs.ID_BATCH, 1,024)")
    parser.add_argument("--warm", type=int, default=200, help="calls per app before the region")
    parser.add_argument("--cache-sim", action="store_true", help="also count simulated cache misses")
    parser.add_argument("--nodes", type=int, default=50, help="nodes of the cluster (default 50)")
    parser.add_argument("--pods", type=int, default=20, help="pods per node (default 20)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(args.calls, args.warm, args.nodes, args.pods)
        return
    counts = measure(args.calls, args.warm, args.cache_sim, args.nodes, args.pods)
    print(f"predicate, {args.nodes} nodes x {args.pods} pods/node, session open, {args.calls} calls per app after {args.warm} "
          f"warm-up calls, callgrind, main thread, per call:")
    events = list(counts["service"])
    print("  " + f"{'app':18s}" + "".join(f"{e:>14s}" for e in events))
    for name, totals in counts.items():
        print("  " + f"{name:18s}" + "".join(f"{totals[e] / args.calls:14,.0f}" for e in events))
    ir = {name: totals["Ir"] / args.calls for name, totals in counts.items()}
    print(f"  service / handwritten-wsgi = {ir['service'] / ir['handwritten-wsgi']:.3f} in instructions "
          f"(engine extra {ir['service'] - ir['handwritten-wsgi']:,.0f} per call)")


if __name__ == "__main__":
    main()
