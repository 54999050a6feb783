"""``python -m tests.tools.kill_workers --seconds 20``: a real gunicorn (2 gthread workers x 4
threads, SQLite session store) serves parallel predicates, prioritizes and allocate events while
one worker is SIGKILLed every ``--kill-every`` seconds (1.5 by default), so replacement workers
keep opening the store under the running ones.

It counts what must never happen: a worker that dies without being killed (the log's
"Worker (pid:N) was sent SIGBUS!" and the like, or a pid that vanished), and an acknowledged
allocate event missing from the session (each allocate that answered 200 must be counted by the
policy ``score session.allocated.tasks * 1000``; an allocate whose connection broke when its
worker was killed may or may not have been stored, and is counted apart).
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
from pathlib import Path

from tests.support.volcano import Server, VolcanoClient
from tests.support.bodies import SAMPLES

COUNT = "score count: session.allocated.tasks * 1000\n"
DEATH = re.compile(r"Worker \(pid:(\d+)\) was sent (\w+)|Worker \(pid:(\d+)\) exited with code (\d+)")


def sample(verb: str) -> dict:
    with open(os.path.join(SAMPLES, f"{verb}.json"), "rb") as f:
        return json.load(f)


def worker_pids(master: int) -> set[int]:
    """The master's live child processes (gunicorn workers)."""
    children: set[int] = set()
    for task in os.listdir(f"/proc/{master}/task"):
        try:
            with open(f"/proc/{master}/task/{task}/children") as f:
                children.update(int(pid) for pid in f.read().split())
        except OSError:
            continue
    return children


class Run:
    def __init__(self, seconds: float, kill_every: float, clients: int = 16) -> None:
        self.seconds, self.kill_every, self.clients = seconds, kill_every, clients
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.counts: Counter = Counter()
        self.acked: set[str] = set()
        self.uncertain: set[str] = set()
        self.killed: list[int] = []
        self.seen: set[int] = set()

    def run(self) -> dict:
        state = Path(tempfile.mkdtemp(prefix="kill-workers-"))
        (state / "policies").mkdir()
        (state / "policies" / "count.policy").write_text(COUNT)
        server = Server(state, state / "policies", workers=2, threads=4)
        try:
            server.wait_ready()
            self.client = VolcanoClient(server.port, timeout=10)
            self.client.call("onSessionOpen", sample("onSessionOpen"))
            threads = [threading.Thread(target=self.caller, daemon=True) for _ in range(self.clients)]
            threads += [threading.Thread(target=self.allocator, args=(n,), daemon=True) for n in range(2)]
            for thread in threads:
                thread.start()
            self.killer(server.process.pid)
            self.stop.set()
            for thread in threads:
                thread.join(timeout=30)
            time.sleep(1.0)  # the last replacement boots
            server.wait_ready()
            stored = self.stored_allocations()
            self.seen |= worker_pids(server.process.pid)
            log = server.log()
        finally:
            server.stop()
        return self.figures(log, stored)

    def caller(self) -> None:
        predicate, prioritize = json.dumps(sample("predicate")).encode(), json.dumps(sample("prioritize")).encode()
        while not self.stop.is_set():
            for verb, body in (("predicate", predicate), ("prioritize", prioritize)):
                self.call(verb, body)

    def allocator(self, n: int) -> None:
        body, i = sample("allocateFunc"), 0
        while not self.stop.is_set():
            uid = f"kill-{n}-{i}"
            body["task"]["UID"] = uid
            status = self.call("allocateFunc", json.dumps(body).encode())
            with self.lock:
                (self.acked if status == 200 else self.uncertain).add(uid)
            i += 1

    def call(self, verb: str, body: bytes) -> int | None:
        try:
            status, _ = self.client.raw(verb, body, fresh=True)
        except (OSError, http.client.HTTPException):  # the worker was killed mid-call
            status = None
        with self.lock:
            self.counts[(verb, status)] += 1
        return status

    def killer(self, master: int) -> None:
        deadline = time.monotonic() + self.seconds
        while time.monotonic() < deadline:
            time.sleep(self.kill_every)
            pids = sorted(worker_pids(master))
            self.seen.update(pids)
            if pids:
                victim = pids[len(self.killed) % len(pids)]
                os.kill(victim, signal.SIGKILL)
                self.killed.append(victim)

    def stored_allocations(self) -> int:
        """What the session holds, read through the policy's score (any worker, any node)."""
        answer = self.client.call("prioritize", sample("prioritize"), fresh=True)
        return round(max(answer["nodeScore"].values()) / 1000)

    def figures(self, log: str, stored: int) -> dict:
        deaths = {}
        for match in DEATH.finditer(log):
            pid = int(match.group(1) or match.group(3))
            deaths[pid] = match.group(2) or f"exit {match.group(4)}"
        unexpected = {pid: how for pid, how in deaths.items() if pid not in self.killed}
        calls = sum(self.counts.values())
        return {
            "seconds": self.seconds, "kill_every": self.kill_every, "calls": calls,
            "answered_200": sum(n for (verb, status), n in self.counts.items() if status == 200),
            "non_200": {f"{verb} {status}": n for (verb, status), n in sorted(self.counts.items(), key=str)
                        if status != 200},
            "workers_killed": len(self.killed), "workers_seen": len(self.seen),
            "unexpected_worker_deaths": {str(pid): how for pid, how in unexpected.items()},
            "fatal_signal_lines": len(re.findall(r"Fatal Python error|was sent SIGBUS|was sent SIGSEGV", log)),
            "allocates_acknowledged": len(self.acked), "allocates_uncertain": len(self.uncertain),
            "allocations_stored": stored,
            "acknowledged_lost": max(0, len(self.acked) - stored),
        }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--kill-every", type=float, default=1.5)
    parser.add_argument("--clients", type=int, default=16, help="threads calling predicate/prioritize")
    args = parser.parse_args(argv)
    figures = Run(args.seconds, args.kill_every, args.clients).run()
    print(json.dumps(figures, indent=2))
    ok = not figures["unexpected_worker_deaths"] and not figures["fatal_signal_lines"] \
        and not figures["acknowledged_lost"]
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
