"""``python -m tests.tools.soak --seconds 60``: 16 clients run scheduling calls against a real
gunicorn (2 workers) while the policies are swapped the kubelet way every second (good and broken
versions alternating) and one worker is SIGKILLed mid-run.

Expectation, computed here: every prioritize score is ``N + 1000 * allocations`` where N is the
score of the policy version the session was pinned to (``score N`` in swap.policy) and
``allocations`` what this run allocated minus deallocated in the session (``count.policy``).
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import signal
import sys
import tempfile
import threading
import time
from collections import Counter

from policy_extender.policyset import compile_sources
from tests.policyset.kubelet import ConfigMapVolume
from tests.policyset.server import Server, sample

COUNT = "score session.allocated.tasks * 1000\n"
#: log lines that explain client failures: workers starting, policy loads and their errors
EXPLAINS = re.compile(r"Booting worker|Worker .* (was sent|exited)|policy|reload", re.I)


def version_scores(scores) -> dict[str, int]:
    return {compile_sources({"count.policy": COUNT, "swap.policy": f"score {n}\n"}).version: n for n in scores}


def rss_kb(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))


class Soak:
    def __init__(self, seconds: float, clients: int = 16) -> None:
        self.seconds, self.clients = seconds, clients
        self.counts: Counter = Counter()
        self.errors: list[tuple[float, str]] = []
        self.wrong: list[str] = []
        self.lock = threading.Lock()
        self.scores = version_scores(range(1, 6))
        self.allocated: int | None = 0  # tasks allocated in the current session, kept by the driver
        self.pinned: int | None = None
        self.stop = threading.Event()
        self.kill_at: float | None = None
        self.rss: dict[int, list[int]] = {}
        self.started, self.started_wall = time.monotonic(), time.time()
        self.failures: list[tuple[float, str, str]] = []   # (time, thread, what): any is a failure
        self.timeline: list[tuple[float, str]] = []        # swaps, the kill, worker pids: to explain failures

    def run(self) -> dict:
        state = tempfile.mkdtemp(prefix="soak-")
        volume = ConfigMapVolume(os.path.join(state, "policies"))
        volume.update({"count.policy": COUNT, "swap.policy": "score 1\n"})
        server = Server(volume.root, state, workers=2, interval=0.2)
        env_note = os.environ.get("PYTHONFAULTHANDLER", "")
        try:
            server.wait_listening()
            self.server = server
            self.started, self.started_wall = time.monotonic(), time.time()
            threads = [self.thread(f"client-{i}", self.client) for i in range(self.clients)]
            threads += [self.thread("swapper", self.swapper, volume), self.thread("driver", self.driver),
                        self.thread("sampler", self.sampler)]
            for t in threads:
                t.start()
            time.sleep(self.seconds / 2)
            self.kill_one_worker()
            time.sleep(self.seconds / 2)
            self.stop.set()
            for t in threads:
                t.join(timeout=30)
            log = server.log()
        finally:
            server.stop()
        return self.figures(log, env_note)

    def thread(self, name: str, target, *args) -> threading.Thread:
        """A daemon thread whose uncaught exception is recorded as a failure of the soak (a thread
        that dies silently would let the soak pass with fewer clients)."""
        def run() -> None:
            try:
                target(*args)
            except BaseException as exc:  # recorded, then the soak fails on it
                self.fail(name, f"{type(exc).__name__}: {exc}")
        return threading.Thread(target=run, name=name, daemon=True)

    def at(self) -> float:
        return round(time.monotonic() - self.started, 3)

    def note(self, what: str) -> None:
        with self.lock:
            self.timeline.append((self.at(), what))

    def fail(self, thread: str, what: str) -> None:
        with self.lock:
            self.failures.append((self.at(), thread, what))

    def call(self, verb: str, body: bytes) -> dict:
        status, raw = self.server.post(verb, body)
        if status != 200:
            raise AssertionError(f"{verb} answered {status}: {raw[:200]!r}")
        return json.loads(raw) if raw else {}

    def client(self) -> None:
        body = sample("prioritize")
        while not self.stop.is_set():
            with self.lock:
                pinned, allocated = self.pinned, self.allocated
            try:
                answer = self.call("prioritize", body)
            except (OSError, http.client.HTTPException) as exc:
                self.errors.append((time.monotonic(), type(exc).__name__))
                continue
            except AssertionError as exc:  # a non-200 answer: a failure; keep going to count them all
                self.fail(threading.current_thread().name, str(exc))
                continue
            with self.lock:
                still = (self.pinned, self.allocated) == (pinned, allocated)
            self.counts["prioritize"] += 1
            if pinned is not None and allocated is not None and still:
                want = pinned + 1000 * allocated
                if set(answer["nodeScore"].values()) != {want}:
                    self.wrong.append(f"want {want}, got {answer['nodeScore']}")

    def driver(self) -> None:
        """Sessions of 2 s: open, allocate 3 tasks (one sent twice), deallocate one, close."""
        task = json.loads(sample("allocateFunc"))["task"]
        while not self.stop.is_set():
            try:
                self.cycle(task)
            except (OSError, http.client.HTTPException) as exc:
                self.errors.append((time.monotonic(), type(exc).__name__))
                with self.lock:
                    self.pinned = None
            except AssertionError as exc:  # a non-200 answer: a failure; the next cycle starts afresh
                self.fail("driver", str(exc))
                with self.lock:
                    self.pinned = None

    def cycle(self, task: dict) -> None:
        with self.lock:
            self.pinned = None
        self.call("onSessionOpen", sample("onSessionOpen"))
        version = self.server.get("/status")[1]["session"]["policy_version"]
        with self.lock:
            self.pinned, self.allocated = self.scores.get(version), 0
        for i, uid in enumerate(["a", "b", "c", "c", "-a"]):
            time.sleep(0.3)
            verb = "deallocateFunc" if uid.startswith("-") else "allocateFunc"
            with self.lock:
                self.allocated = None  # in flight: no expectation until the event is acknowledged
            self.call(verb, json.dumps({"task": {**task, "UID": "soak-" + uid.lstrip("-")}}).encode())
            with self.lock:
                self.allocated = {0: 1, 1: 2, 2: 3, 3: 3, 4: 2}[i]
            self.counts[verb] += 1
        with self.lock:
            self.pinned = None  # closing: the next answers use the current version, no session
        self.call("onSessionClose", b"{}")
        self.counts["sessions"] += 1

    def swapper(self, volume: ConfigMapVolume) -> None:
        n = 0
        while not self.stop.wait(1.0):
            n += 1
            text = f"score {1 + n % 5}\n" if n % 2 else "score 1 +\n"
            volume.update({"count.policy": COUNT, "swap.policy": text})
            self.note(f"swap {n} {'good' if n % 2 else 'broken'}: {text.strip()}")
            self.counts["swaps good" if n % 2 else "swaps broken"] += 1

    def sampler(self) -> None:
        while not self.stop.wait(0.5):
            for pid in self.worker_pids():
                try:
                    self.rss.setdefault(pid, []).append(rss_kb(pid))
                except (OSError, StopIteration):  # gone, or a zombie without VmRSS
                    pass

    def worker_pids(self) -> list[int]:
        master = self.server.process.pid
        with open(f"/proc/{master}/task/{master}/children") as f:
            return [int(p) for p in f.read().split()]

    def kill_one_worker(self) -> None:
        pids = self.worker_pids()
        victim = pids[0]
        self.kill_at = time.monotonic()
        os.kill(victim, signal.SIGKILL)
        self.counts["workers killed"] += 1
        self.note(f"SIGKILL worker {victim} (workers were {pids})")
        threading.Thread(target=self.note_replacement, args=(set(pids),), daemon=True).start()

    def note_replacement(self, before: set[int]) -> None:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            new = set(self.worker_pids()) - before
            if new:
                self.note(f"replacement worker {sorted(new)} forked")
                return
            time.sleep(0.01)

    def figures(self, log: str, faulthandler: str) -> dict:
        near_kill = [e for t, e in self.errors if self.kill_at and abs(t - self.kill_at) < 2.0]
        memory = {}
        for pid, samples in self.rss.items():
            third = max(1, len(samples) // 3)
            if len(samples) >= 6:
                memory[pid] = (sum(samples[:third]) // third, sum(samples[-third:]) // third)
        return {"requests": dict(self.counts), "wrong decisions": len(self.wrong), "wrong examples": self.wrong[:3],
                "errors": len(self.errors), "errors near the kill": len(near_kill),
                "rss kB first/last third": memory, "segfaults in log": log.count("Segmentation fault")
                + log.count("Fatal Python error"), "crash lines": [line for line in log.splitlines()
                                                                    if "Traceback" in line or "signal 11" in line][:5],
                "faulthandler": faulthandler or "off",
                "started (UTC)": time.strftime("%H:%M:%S", time.gmtime(self.started_wall))
                + f".{int(self.started_wall % 1 * 1000):03d}" if self.failures else "",
                "client failures": len(self.failures), "failure examples": self.failures[:5],
                "timeline": self.timeline if self.failures else [],
                "log excerpt": [line for line in log.splitlines() if EXPLAINS.search(line)][:40] if self.failures else []}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.tools.soak")
    parser.add_argument("--seconds", type=float, default=60)
    args = parser.parse_args(argv)
    os.environ.setdefault("PYTHONFAULTHANDLER", "1")
    figures = Soak(args.seconds).run()
    print(json.dumps(figures, indent=2))
    ok = figures["wrong decisions"] == 0 and figures["errors"] == figures["errors near the kill"] \
        and figures["client failures"] == 0
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
