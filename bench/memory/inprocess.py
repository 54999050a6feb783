"""Memory over whole cycles in one process and one thread: what the service's own code keeps.

``bench.memory.served`` measures a real gunicorn pod (master, workers, their threads), where RSS also
moves with which thread served what and with glibc's per-arena free lists. This one takes those
away: the service's WSGI app is called in-process, in one thread, with the same whole cycles
(``bench.scenarios.one_cycle``: onSessionOpen of the 50 x 20 snapshot, 18 MB, then per pending
job enqueue and overused, per task 50 predicates, prioritize, allocateFunc, then jobReady,
preemptable, reclaimable, deallocateFunc, onSessionClose) and a policy swap after every cycle
(``--swap-every`` cycles: the score's factor edited in a copy of ``bench/policies``, then the
reloader's ``reload_now``: each swap a new version, compiled and kept by the LRU as in a
worker). Every ``--every`` cycles, between two cycles (nothing in flight) and after a full
``gc.collect()``, it prints glibc's bytes in use (``mallinfo2().uordblks``: every C and Python
allocation over 512 bytes), the heap glibc holds (``arena``), the bytes in mapped chunks
(``hblkhd``), Python's allocated blocks (``sys.getallocatedblocks()``), SQLite's own count
(``sqlite3_memory_used()``) and the process's anonymous RSS. The slopes are least-squares fits
over the second half of the samples, in bytes per cycle.

``python -m bench.memory.inprocess [--cycles 2000] [--every 200] [--swap-every 1]``
"""

from __future__ import annotations

import argparse
import atexit
import ctypes
import ctypes.util
import gc
import os
import re
import shutil
import sys
import tempfile
import time

from bench.generate import Bodies, Cluster, ClusterSpec
from bench.cpu.inprocess import call
from bench.memory.served import POLICY_NAME, fit_slope, policy_text
from bench.scenarios import one_cycle
from bench.server import POLICY_DIR
from policy_extender import heap


def _sqlite():
    """The SQLite library ``_sqlite3`` links (its memory counter), or None where it is static."""
    import sqlite3  # noqa: F401  (loads the library first)
    try:
        lib = ctypes.CDLL(ctypes.util.find_library("sqlite3") or "libsqlite3.so.0")
    except OSError:
        return None
    lib.sqlite3_memory_used.restype = ctypes.c_int64
    return lib


def _anon_kb() -> int:
    with open("/proc/self/status") as status:
        return int(re.search(r"RssAnon:\s*(\d+)", status.read()).group(1))


class InProcess:
    """``bench.load.Pool``'s ``call``/``map``, answered by the WSGI app in this thread."""

    def __init__(self, app) -> None:
        self.app = app

    def call(self, verb: str, path: str, body: bytes) -> bytes:
        return call(self.app, path, body)

    def map(self, calls) -> list[bytes]:
        return [call(self.app, path, body) for _, path, body in calls]


def sample(sqlite) -> dict:
    gc.collect()
    info = heap.malloc_info()
    return {"in_use": info.uordblks, "heap": info.arena, "mapped": info.hblkhd,
            "blocks": sys.getallocatedblocks(), "sqlite": sqlite.sqlite3_memory_used() if sqlite else -1,
            "anon_kb": _anon_kb()}


def run(cycles: int, every: int, swap_every: int) -> list[tuple[int, float, dict]]:
    from policy_extender.config import Config
    from policy_extender.web import create_app

    sqlite = _sqlite()
    if heap.malloc_info() is None:
        raise SystemExit("needs glibc's mallinfo2 (2.33+)")
    cluster = Cluster(ClusterSpec(nodes=50, pods_per_node=20))
    bodies, rows = Bodies(cluster), []
    snapshot, jobs = bodies.snapshot(), min(cluster.spec.pending_job_count, 4)
    tmp = tempfile.mkdtemp(prefix="memory-inprocess-")
    # removed at exit, after the tally's own exit flush (atexit runs the last registered first)
    atexit.register(shutil.rmtree, tmp, True)
    policies = os.path.join(tmp, "policies")
    shutil.copytree(POLICY_DIR, policies)
    app = create_app(Config(policy_dirs=(policies,), session_store=f"sqlite:{tmp}/sessions.sqlite3",
                            reload_interval=0.0, log_level="warning"))
    service, pool, swaps, t0 = app.extensions["policy_extender"], InProcess(app.wsgi_app), 0, time.monotonic()
    for n in range(cycles + 1):
        if n % every == 0:
            row = sample(sqlite)
            rows.append((n, time.monotonic() - t0, row))
            print(f"{n:6d} {time.monotonic() - t0:6.0f} s  in use {row['in_use'] / 2**20:7.3f} MiB  "
                  f"heap {row['heap'] / 2**20:7.3f}  mapped {row['mapped'] / 2**20:6.2f}  "
                  f"python blocks {row['blocks']:7d}  sqlite {row['sqlite'] / 1024:6.0f} KiB  "
                  f"anon RSS {row['anon_kb'] / 1024:6.2f} MiB  swaps {swaps}", flush=True)
        if n == cycles:
            break
        one_cycle(pool, bodies, snapshot, jobs)
        if swap_every and (n + 1) % swap_every == 0:
            swaps += 1
            with open(os.path.join(policies, POLICY_NAME), "w") as out:
                out.write(policy_text(swaps))
            status = service.reloader.reload_now()
            assert status.last_reload_ok, status
    service.stop()
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.memory.inprocess", description=__doc__.splitlines()[0])
    parser.add_argument("--cycles", type=int, default=2000)
    parser.add_argument("--every", type=int, default=200, help="cycles between samples (default 200)")
    parser.add_argument("--swap-every", type=int, default=1, help="cycles between policy swaps, 0: none (default 1)")
    args = parser.parse_args(argv)
    print(__doc__.split("\n\n")[1].replace("\n", " "))
    print(f"cycles {args.cycles}, a sample every {args.every}, a swap every {args.swap_every or 'never'}; "
          f"load average {os.getloadavg()[0]:.2f}", flush=True)
    rows = run(args.cycles, args.every, args.swap_every)
    late = rows[len(rows) // 2:]
    for key, label in (("in_use", "glibc in use"), ("heap", "glibc heap"), ("anon_kb", "anonymous RSS")):
        scale = 1024 if key == "anon_kb" else 1
        slope = fit_slope([(n, row[key] * scale) for n, _, row in late])
        print(f"slope over cycles {late[0][0]}-{late[-1][0]}: {label} {slope:+.0f} bytes per cycle")


if __name__ == "__main__":
    main()
