"""A real ``policy-extender serve`` (gunicorn, several workers) on loopback, and a client for it.

Used by the slow service-level reload tests and by ``measure_latency.py``. Each request opens a
new connection, so the kernel spreads requests over every worker.
"""

from __future__ import annotations

import http.client
import json
import os
import time
from pathlib import Path

from tests.support.volcano import Server as WebServer

from tests.support.bodies import SAMPLES


def sample(verb: str) -> bytes:
    with open(os.path.join(SAMPLES, f"{verb}.json"), "rb") as f:
        return f.read()


def without_watchdog(state_dir: str) -> str:
    """A directory whose ``watchdog`` package fails to import: the service then polls only."""
    package = os.path.join(state_dir, "no-watchdog", "watchdog")
    os.makedirs(package, exist_ok=True)
    with open(os.path.join(package, "__init__.py"), "w") as f:
        f.write('raise ImportError("watchdog disabled to measure polling alone")\n')
    return os.path.dirname(package)


class Server(WebServer):
    """The service with hot reload on (``interval``), every request on a new connection."""

    def __init__(self, policy_dir: str, state_dir: str, workers: int = 3, interval: float = 0.5,
                 inotify: bool = True, extra_args: tuple[str, ...] = ()) -> None:
        super().__init__(Path(state_dir), Path(policy_dir), workers=workers, threads=4,
                         reload_interval=interval, extra_args=extra_args,
                         pythonpath="" if inotify else without_watchdog(state_dir))

    def wait_listening(self, timeout: float = 20.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"server exited with {self.process.returncode}:\n{self.log()}")
            try:
                self.get("/healthz")
                return
            except OSError:
                time.sleep(0.05)
        raise TimeoutError(f"server not listening after {timeout}s:\n{self.log()}")

    def request(self, method: str, path: str, body: bytes | None = None) -> tuple[int, bytes]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        try:
            headers = {"Content-Type": "application/json"} if body is not None else {}
            conn.request(method, path, body=body, headers=headers)
            response = conn.getresponse()
            return response.status, response.read()
        finally:
            conn.close()

    def get(self, path: str) -> tuple[int, dict]:
        status, body = self.request("GET", path)
        return status, json.loads(body)

    def post(self, verb: str, body: bytes) -> tuple[int, bytes]:
        return self.request("POST", "/" + verb, body)

    def score(self, body: bytes) -> float:
        """The one score prioritize gave every node; raises if the answer is not uniform."""
        status, raw = self.post("prioritize", body)
        if status != 200:
            raise AssertionError(f"prioritize answered {status}: {raw[:300]!r}")
        scores = set(json.loads(raw)["nodeScore"].values())
        if len(scores) != 1:
            raise AssertionError(f"prioritize mixed scores {scores}: {raw[:300]!r}")
        return scores.pop()

    def worker_versions(self, timeout: float = 10.0) -> dict[int, str | None]:
        """{pid: current policy version} of every worker, asking /status until all answered."""
        seen: dict[int, str | None] = {}
        deadline = time.monotonic() + timeout
        while len(seen) < self.workers and time.monotonic() < deadline:
            _, status = self.get("/status")
            seen[status["pid"]] = status["policy_version"]
        return seen

    def wait_all_on(self, version: str, timeout: float = 15.0) -> float:
        """Seconds until every live worker reports ``version`` (sampling /status on new connections).

        A worker counts as live when it answered one of the last few samples, so workers that
        gunicorn replaced (SIGHUP to the master) drop out.
        """
        started = time.monotonic()
        window = 8 * self.workers
        last: dict[int, tuple[str | None, int]] = {}  # pid -> (version, sample number)
        sample_number = 0
        while time.monotonic() - started < timeout:
            _, status = self.get("/status")
            sample_number += 1
            last[status["pid"]] = (status["policy_version"], sample_number)
            live = [v for v, n in last.values() if n > sample_number - window]
            if len(live) >= self.workers and all(v == version for v in live):
                return time.monotonic() - started
        raise TimeoutError(f"workers never all reached {version}: {last}")
