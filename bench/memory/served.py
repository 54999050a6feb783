"""Memory over time: RSS of a real ``policy-extender serve`` (master and each worker) under whole
scheduling cycles and a policy swap every second.

Method (printed by the script): a real ``policy-extender serve`` (gunicorn, ``--workers`` x 4
threads, its own SQLite session store, policy directory a kubelet-style ConfigMap volume,
``tests/policyset/kubelet.py``, reloaded on inotify); one client thread runs whole cycles back to back
(``bench.scenarios.one_cycle``: onSessionOpen of the 50 x 20 snapshot, 18 MB, then per pending
job enqueue and overused, per task 50 predicates on 16 keep-alive connections, prioritize over
the feasible nodes, allocateFunc, then jobReady, preemptable, reclaimable, deallocateFunc,
onSessionClose); another thread swaps the policy set every ``--swap-every`` seconds through a
``..data`` symlink swap, each swap a new version (the score's factor changes). Every
second VmRSS (and its anonymous / file parts) of the master and each worker is read from
``/proc``; every ``--interval`` seconds the lowest read of the interval is printed (the process at
rest: a worker holding an 18 MB body in flight is not memory it keeps) with the highest; the slope
is a least-squares fit of those lowest reads over time after the warm-up (``--warmup`` seconds),
in MiB per minute, and the pod's total is fitted again from each of the ``--late`` minutes, with
its range from there (a worker's first snapshot and bodies make steps in the first minutes).

``python -m bench.memory.served --minutes 3 [--interval 5] [--warmup 60] [--late 5,10,20,30] [--env MALLOC_ARENA_MAX=2]``
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

from bench.generate import Bodies, Cluster, ClusterSpec
from bench.load import Pool
from bench.scenarios import one_cycle
from bench.server import POLICY_DIR, Server, status_kb

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # tests.policyset.kubelet: the kubelet's ConfigMap update, step by step
from tests.policyset.kubelet import ConfigMapVolume  # noqa: E402

POLICY_NAME = "gpu.policy"


def policy_text(n: int) -> str:
    """The benchmark policy with the score's factor ``10 + n``: every swap is a new version."""
    text = (POLICY_DIR / POLICY_NAME).read_text()
    assert "score gpu_binpack: 10 *" in text, "bench/policies/gpu.policy no longer has the score this script edits"
    return text.replace("score gpu_binpack: 10 *", f"score gpu_binpack: {10 + n} *")


def fit_slope(points: list[tuple[float, float]]) -> float:
    """Least-squares slope of y over x (0 when fewer than 2 distinct x)."""
    if len(points) < 2:
        return 0.0
    mx = statistics.fmean(x for x, _ in points)
    my = statistics.fmean(y for _, y in points)
    sxx = sum((x - mx) ** 2 for x, _ in points)
    return sum((x - mx) * (y - my) for x, y in points) / sxx if sxx else 0.0


def rss(pid: int) -> tuple[float, float, float]:
    """(VmRSS, RssAnon, RssFile + RssShmem) of ``pid`` in MiB; zeros once it is gone."""
    try:
        return tuple(status_kb(pid, key) / 1024 for key in ("VmRSS", "RssAnon", "RssFile")) \
            if os.path.exists(f"/proc/{pid}") else (0.0, 0.0, 0.0)
    except OSError:
        return 0.0, 0.0, 0.0


class Driver:
    """Whole cycles back to back and a policy swap every ``swap_every`` seconds, until stopped."""

    def __init__(self, server: Server, volume: ConfigMapVolume, swap_every: float):
        self.server, self.volume, self.swap_every = server, volume, swap_every
        self.stop = threading.Event()
        self.cycles = self.swaps = self.errors = 0
        cluster = Cluster(ClusterSpec(nodes=50, pods_per_node=20))
        self.bodies = Bodies(cluster)
        self.snapshot = self.bodies.snapshot()
        self.jobs = min(cluster.spec.pending_job_count, 4)

    def cycle_loop(self) -> None:
        while not self.stop.is_set():
            pool = Pool(self.server.host, self.server.port, 16)
            try:
                one_cycle(pool, self.bodies, self.snapshot, self.jobs)
                self.errors += sum(pool.result.errors.values())
            finally:
                pool.close()
            self.cycles += 1

    def swap_loop(self) -> None:
        while not self.stop.wait(self.swap_every):
            self.swaps += 1
            self.volume.update({POLICY_NAME: policy_text(self.swaps)})


def late_fits(samples: list, starts: tuple[float, ...]) -> list[tuple[float, int, float, float, float]]:
    """For each start (minutes) with 3 samples or more from it: (start, samples, slope of the total in
    MiB/min, lowest total, highest total). The warm-up's steps (a worker's first snapshot, its
    first large bodies) fall in the first minutes: a fit from later says whether the pod levels."""
    fits = []
    for start in starts:
        late = [(t / 60, total) for t, _, total, _ in samples if t / 60 >= start]
        if len(late) >= 3:
            totals = [total for _, total in late]
            fits.append((start, len(late), fit_slope(late), min(totals), max(totals)))
    return fits


def run(minutes: float, interval: float, warmup: float, swap_every: float, workers: int, env: dict[str, str]) -> dict:
    with tempfile.TemporaryDirectory(prefix="bench-memory-") as tmp:
        volume = ConfigMapVolume(os.path.join(tmp, "policies"))
        volume.update({POLICY_NAME: policy_text(0)})
        extra = ("--policy-dirs", volume.root, "--reload-interval", "1", "--session-store", f"sqlite:{tmp}/sessions.sqlite3")
        saved = {k: os.environ.get(k) for k in env}
        os.environ.update(env)
        try:
            server = Server("service", workers, 4, extra=extra).start()
        finally:
            for k, v in saved.items():
                os.environ.pop(k, None) if v is None else os.environ.__setitem__(k, v)
        with server:
            driver = Driver(server, volume, swap_every)
            threads = [threading.Thread(target=driver.cycle_loop, daemon=True), threading.Thread(target=driver.swap_loop, daemon=True)]
            for t in threads:
                t.start()
            samples, start, reads = [], time.monotonic(), {}
            pids = {"master": server.proc.pid}
            print(f"{'t s':>6} {'cycles':>6} {'swaps':>5} | " + "  ".join(f"{n:>22}" for n in ("master", "worker 1", "worker 2")[:workers + 1])
                  + " |  total MiB   (each: RSS = anon + file MiB)", flush=True)
            try:
                while True:
                    t = time.monotonic() - start
                    for k, pid in enumerate(server.worker_pids()[:workers], 1):
                        pids.setdefault(f"worker {k}", pid)
                        if pids[f"worker {k}"] != pid:
                            print(f"  worker {k} replaced: pid {pids[f'worker {k}']} -> {pid}", flush=True)
                            pids[f"worker {k}"] = pid
                    row = {name: min(reads.get(name) or [rss(pid)]) for name, pid in pids.items()}
                    peak = {name: max((r[0] for r in reads.get(name) or [row[name]])) for name in pids}
                    total = sum(r[0] for r in row.values())
                    samples.append((t, {n: r[0] for n, r in row.items()}, total, peak))
                    print(f"{t:6.0f} {driver.cycles:6d} {driver.swaps:5d} | "
                          + "  ".join(f"{r[0]:6.1f} = {r[1]:5.1f} + {r[2]:5.1f}" for r in row.values())
                          + f" | {total:7.1f} | " + " ".join(f"{v:5.1f}" for v in peak.values()), flush=True)
                    if t >= minutes * 60:
                        break
                    reads = {name: [] for name in pids}
                    while time.monotonic() < start + len(samples) * interval:   # 1 s reads: min = at rest
                        for name, pid in pids.items():
                            reads[name].append(rss(pid))
                        time.sleep(min(1.0, max(0.0, start + len(samples) * interval - time.monotonic())))
            finally:
                driver.stop.set()
                for th in threads:
                    th.join(30)
            tail = server.stderr_tail(2000)
    after = [s for s in samples if s[0] >= warmup]
    slopes = {name: fit_slope([(s[0] / 60, s[1][name]) for s in after]) for name in samples[-1][1]}
    slopes["total"] = fit_slope([(s[0] / 60, s[2]) for s in after])
    return {"samples": samples, "slopes": slopes, "cycles": driver.cycles, "swaps": driver.swaps, "errors": driver.errors,
            "first_total": samples[0][2], "warm_total": after[0][2] if after else None, "last_total": samples[-1][2],
            "log_tail": tail}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.memory.served", description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=3.0)
    parser.add_argument("--interval", type=float, default=5.0, help="seconds between RSS samples (default 5)")
    parser.add_argument("--warmup", type=float, default=60.0, help="seconds left out of the slope fit (default 60)")
    parser.add_argument("--swap-every", type=float, default=1.0, help="seconds between policy swaps (default 1)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--env", action="append", default=[], metavar="NAME=VALUE", help="environment of the server (e.g. MALLOC_ARENA_MAX=2)")
    parser.add_argument("--late", default="5,10,20,30",
                        help="minutes from which the total is fitted again, with its range (default 5,10,20,30)")
    args = parser.parse_args(argv)
    env = dict(e.split("=", 1) for e in args.env)
    print(f"method: real `policy-extender serve` ({args.workers} workers x 4 threads, SQLite session store), whole cycles "
          f"back to back (50 nodes x 20 pods, 18 MB snapshot, 16 predicate connections), a kubelet-style policy swap every "
          f"{args.swap_every:g} s (each a new version); VmRSS of master and workers every {args.interval:g} s; slope = "
          f"least squares over the samples (lowest of 1 s reads per interval) after {args.warmup:g} s, MiB/min; nproc {os.cpu_count()}, load average "
          f"{os.getloadavg()[0]:.2f}{'; server env ' + ' '.join(args.env) if args.env else ''}", flush=True)
    r = run(args.minutes, args.interval, args.warmup, args.swap_every, args.workers, env)
    print(f"\n{r['cycles']} cycles, {r['swaps']} swaps, {r['errors']} non-200 answers; load average {os.getloadavg()[0]:.2f}")
    print(f"total RSS: start {r['first_total']:.1f} MiB, after warm-up {r['warm_total']:.1f} MiB, end {r['last_total']:.1f} MiB")
    print("slope after warm-up (MiB/min): " + ", ".join(f"{n} {v:+.2f}" for n, v in r["slopes"].items()))
    for start, count, slope, low, high in late_fits(r["samples"], tuple(float(m) for m in args.late.split(","))):
        print(f"total from minute {start:g} ({count} samples): {slope:+.3f} MiB/min, {low:.1f}-{high:.1f} MiB")
    if r["errors"]:
        print("server log tail:\n" + r["log_tail"])


if __name__ == "__main__":
    main()
