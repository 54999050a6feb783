"""The cluster's processes: each started with its log in the run directory, in its own process
group (a stop reaches its children: gunicorn's workers, say), and stopped in reverse order."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Proc:
    def __init__(self, name: str, argv: Sequence[str], log: Path, env: Mapping[str, str] | None = None,
                 cwd: Path | None = None):
        self.name, self.argv, self.log_path, self.env, self.cwd = name, list(argv), log, env, cwd
        self.popen: subprocess.Popen | None = None
        self.starts = 0

    def start(self) -> Proc:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = open(self.log_path, "ab")
        log.write(f"\n=== start {self.starts + 1}: {' '.join(self.argv)}\n".encode())
        log.flush()
        self.popen = subprocess.Popen(self.argv, stdout=log, stderr=subprocess.STDOUT, cwd=self.cwd,
                                      env=dict(self.env) if self.env is not None else None,
                                      start_new_session=True)
        log.close()
        self.starts += 1
        return self

    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def stop(self, grace: float = 10) -> None:
        if not self.alive():
            return
        assert self.popen is not None
        try:
            os.killpg(self.popen.pid, signal.SIGTERM)
        except ProcessLookupError:
            return
        try:
            self.popen.wait(grace)
        except subprocess.TimeoutExpired:
            os.killpg(self.popen.pid, signal.SIGKILL)
            self.popen.wait(5)

    def tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


def wait_for(what: str, ready: Callable[[], bool], timeout: float, proc: Proc | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and not proc.alive():
            raise RuntimeError(f"{proc.name} exited while waiting for {what}:\n{proc.tail()}")
        try:
            if ready():
                return
        except Exception:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"timed out after {timeout:.0f}s waiting for {what}"
                       + (f":\n{proc.tail()}" if proc is not None else ""))


def http_ok(url: str, context=None) -> bool:
    with urllib.request.urlopen(url, timeout=2, context=context) as r:
        return 200 <= r.status < 300
