"""``python -m tests.served.gc_probe_serve PROBE_FILE serve ...``: ``policy-extender serve`` whose
workers answer ``SIGUSR2`` (test-only; gunicorn leaves it at its default in a worker, which would
end the process) with one full garbage collection and a line appended to ``PROBE_FILE``:
``{"pid", "collected", "rss_before", "rss_after"}`` (objects the collection found unreachable,
and the worker's ``VmRSS`` in KiB before and after it). The handler runs on the worker's main
thread (its event loop), between two events.

The memory tests read it to tell memory held by references (a body some object still points to:
RSS stays after the collection) from memory held only by a reference cycle (freed by the
collection: ``rss_after`` falls) from memory returned (neither)."""

from __future__ import annotations

import gc
import json
import os
import signal
import sys


def rss_kib() -> int:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))


def main(argv: list[str]) -> int:
    probe_file, rest = argv[0], argv[1:]
    from policy_extender import gunicorn_conf
    from policy_extender.cli import main as cli

    shipped = gunicorn_conf.post_worker_init

    def collect(_signum, _frame) -> None:
        before = rss_kib()
        collected = gc.collect()
        line = {"pid": os.getpid(), "collected": collected, "rss_before": before, "rss_after": rss_kib()}
        with open(probe_file, "a") as f:
            f.write(json.dumps(line) + "\n")

    def post_worker_init(worker) -> None:
        shipped(worker)
        signal.signal(signal.SIGUSR2, collect)

    gunicorn_conf.post_worker_init = post_worker_init
    return cli(rest)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
