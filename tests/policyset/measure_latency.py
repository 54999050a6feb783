"""Reload latency through the real service: time from a kubelet-style ``..data`` swap until every
gunicorn worker serves the new version. Prints figures; asserts nothing.

    cd /work/main && python -m tests.policyset.measure_latency [--workers 4] [--interval 5] [--swaps 10] [--no-inotify]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time

from .kubelet import ConfigMapVolume
from .language import Language
from .server import Server, sample


def measure(workers: int, interval: float, swaps: int, inotify: bool) -> list[float]:
    language = Language()
    with tempfile.TemporaryDirectory() as state:
        volume = ConfigMapVolume(f"{state}/policies")
        volume.update({"a.policy": language.good(0)})
        server = Server(volume.root, state, workers=workers, interval=interval, inotify=inotify)
        try:
            server.wait_listening()
            _, status = server.get("/status")
            assert status["policy"]["inotify"] == inotify, status["policy"]
            server.wait_all_on(language.compile({"a.policy": language.good(0)}).version)
            return [swap(server, volume, language, n, interval) for n in range(1, swaps + 1)]
        finally:
            server.stop()


def swap(server: Server, volume: ConfigMapVolume, language: Language, score: int, interval: float) -> float:
    files = {"a.policy": language.good(score)}
    version = language.compile(files).version
    swapped = []
    volume.update(files, between=lambda step: swapped.append(time.monotonic()) if step == "..data swapped" else None)
    server.wait_all_on(version, timeout=interval * 3 + 10)
    latency = time.monotonic() - swapped[0]
    body = sample("prioritize")
    assert {server.score(body) for _ in range(server.workers * 3)} == {score}
    time.sleep(0.3)
    return latency


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--interval", type=float, default=5.0)
    parser.add_argument("--swaps", type=int, default=10)
    parser.add_argument("--no-inotify", dest="inotify", action="store_false",
                        help="hide watchdog from the workers: polling alone")
    args = parser.parse_args()
    latencies = measure(args.workers, args.interval, args.swaps, args.inotify)
    ms = sorted(x * 1000 for x in latencies)
    print(f"workers={args.workers} interval={args.interval}s inotify={args.inotify} swaps={args.swaps}: "
          "swap -> every worker "
          f"on the new version: median {statistics.median(ms):.0f} ms, min {ms[0]:.0f} ms, max {ms[-1]:.0f} ms")


if __name__ == "__main__":
    main()
