"""Benchmark: median microseconds per head(), allocate() and SessionCache.env() for each store.

    python -m bench.cpu.session_store [--n 5000] [--redis-url redis://127.0.0.1:6379/0]

Without ``--redis-url`` it starts a throwaway ``redis-server`` on a free loopback port (skipped
with a note if the binary is missing). Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext

from policy_extender.session.allocation import AllocationRecord, decode_allocation, encode_allocation
from policy_extender.session.cache import SessionCache
from policy_extender.session.sqlite import SqliteStore


class _Snapshot:
    def job(self, uid):
        return None

    def queue(self, name):
        return None


def median_us(operation: Callable[[int], object], n: int) -> float:
    samples = []
    for i in range(n):
        start = time.perf_counter_ns()
        operation(i)
        samples.append(time.perf_counter_ns() - start)
    return statistics.median(samples) / 1000


def measure(name: str, store, n: int) -> None:
    session_id = store.open(b"x" * 100_000, "bench", {"bench.policy": "score 1\n"})
    record = encode_allocation(AllocationRecord("t", "job-0", "node-0", {"nvidia.com/gpu": 1.0}))
    head = median_us(lambda i: store.head(), n)
    allocate = median_us(lambda i: store.allocate(session_id, f"task-{i}", record), n)
    cache = SessionCache(store, lambda data: _Snapshot(), decode_allocation)
    cache.env()
    env = median_us(lambda i: cache.env(), n)
    recount = median_us(lambda i: (store.allocate(session_id, f"task-{i}", record), cache.env()),
                        min(n, 1000))
    store.close()
    print(f"{name:7} head() {head:8.1f} us   allocate() {allocate:8.1f} us   "
          f"cache.env() unchanged {env:8.1f} us   (median of {n})")
    print(f"{name:7} allocate() + cache.env() catching up one event, {n}+ allocations held {recount:8.1f} us")
    big = b"x" * (20 * 1024 * 1024)
    opened = median_us(lambda i: store.open(big, "bench", {}), 5)
    loaded = median_us(lambda i: store.snapshot(store.head().session_id), 5)
    print(f"{name:7} open() 20 MiB snapshot {opened / 1000:8.1f} ms   snapshot() read back "
          f"{loaded / 1000:8.1f} ms")


@contextmanager
def throwaway_redis() -> Iterator[str | None]:
    binary = shutil.which("redis-server")
    if binary is None:
        yield None
        return
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with tempfile.TemporaryDirectory() as directory:
        process = subprocess.Popen([binary, "--port", str(port), "--bind", "127.0.0.1", "--dir",
                                    directory, "--save", "", "--appendonly", "no"],
                                   stdout=subprocess.DEVNULL)
        try:
            time.sleep(0.3)
            yield f"redis://127.0.0.1:{port}/0"
        finally:
            process.terminate()
            process.wait()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=5000, help="calls per figure")
    parser.add_argument("--redis-url", help="an existing Redis (default: start a throwaway one)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(dir="/dev/shm" if os.path.isdir("/dev/shm") else None) as d:
        measure("sqlite", SqliteStore(f"{d}/bench.sqlite3"), args.n)
    with (nullcontext(args.redis_url) if args.redis_url else throwaway_redis()) as url:
        if url is None:
            print("redis   skipped: redis-server is not installed and no --redis-url given")
            return
        from policy_extender.session.redis import RedisStore
        measure("redis", RedisStore(url, prefix="bench"), args.n)


if __name__ == "__main__":
    main()
