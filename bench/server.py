"""Start a server under test in its own process group and read its processes' CPU and memory.

Three kinds of server, all under the service's own gunicorn settings
(``policy_extender.gunicorn_conf.settings``: gthread workers, keep-alive, same workers/threads):

* ``bare``: ``bench.bare_wsgi:app`` (the HTTP floor); ``bare-socket``: the same reading the body
  the service's way (``bench.bare_wsgi:socket_app``, the stricter floor; not in the default set);
  ``bare-socket-kept``: that floor with each large body's map kept for the next (``kept_socket_app``);
* ``handwritten`` / ``handwritten-wsgi``: ``bench.handwritten`` as Flask / as plain WSGI;
* ``service``: the real ``policy-extender serve`` on ``bench/policies``.

``python -m bench.server MODULE:APP --bind HOST:PORT --workers N --threads T`` is the launcher
for the first two (gunicorn with the service's settings and another app).
"""

from __future__ import annotations

import argparse
import atexit
import importlib
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.load import Connection

ROOT = Path(__file__).resolve().parent.parent
POLICY_DIR = Path(__file__).resolve().parent / "policies"
CLK_TCK = os.sysconf("SC_CLK_TCK")
#: the default 16 MiB limit answers 413 to prioritize over 500 nodes (~96 MB): raised as an operator would
SERVICE_BODY_LIMITS = "onSessionOpen=512MiB,prioritize=256MiB"
APPS = {"bare": "bench.bare_wsgi:app", "bare-socket": "bench.bare_wsgi:socket_app", "bare-socket-kept": "bench.bare_wsgi:kept_socket_app", "handwritten": "bench.handwritten:app", "handwritten-wsgi": "bench.handwritten:wsgi_app"}


def free_port() -> int:
    """A free port below the ephemeral range: a client connecting before the server listens
    must never be handed the same port as its own source port (a TCP self-connection)."""
    low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    for port in random.sample(range(10000, min(low, 30000)), 200):
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
                return port
            except OSError:
                continue
    raise RuntimeError("no free port below the ephemeral range")


def command(kind: str, port: int, workers: int, threads: int, extra: tuple[str, ...] = ()) -> list[str]:
    bind = f"127.0.0.1:{port}"
    if kind == "service":
        return [sys.executable, "-m", "policy_extender", "serve", "--bind", bind, "--workers", str(workers), "--threads", str(threads),
                "--policy-dirs", str(POLICY_DIR), "--reload-interval", "0", "--log-level", "warning",
                "--body-limits", SERVICE_BODY_LIMITS, *extra]
    return [sys.executable, "-m", "bench.server", APPS[kind], "--bind", bind, "--workers", str(workers), "--threads", str(threads)]


_RUNNING: set["Server"] = set()


@atexit.register
def stop_all() -> None:
    """Servers run in their own session: stop every one this process started, even on an error."""
    for server in list(_RUNNING):
        server.stop()


class Server:
    """A running server: ``with Server("bare") as s: drive(s.host, s.port, ...)``."""

    def __init__(self, kind: str, workers: int = 2, threads: int = 4, extra: tuple[str, ...] = (),
                 root: Path | None = None):
        """``extra``: more ``serve`` flags (the service only), e.g. its own ``--session-store``;
        ``root``: another checkout whose code to run (a baseline measured in the same run)."""
        self.kind, self.workers, self.threads, self.extra = kind, workers, threads, extra
        self.root = Path(root) if root is not None else ROOT
        self.host, self.port = "127.0.0.1", free_port()
        self.proc: subprocess.Popen | None = None

    def __enter__(self) -> "Server":
        return self if self.proc is not None else self.start()

    def start(self) -> "Server":
        env = {**os.environ, "PYTHONPATH": f"{self.root}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
        self.log = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(command(self.kind, self.port, self.workers, self.threads, self.extra), cwd=self.root, env=env,
                                     stdout=subprocess.DEVNULL, stderr=self.log, start_new_session=True)
        _RUNNING.add(self)
        self._wait_ready()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def stop(self) -> None:
        _RUNNING.discard(self)
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()

    def _wait_ready(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.kind} server exited with {self.proc.returncode}:\n{self.stderr_tail()}")
            try:
                status, _ = Connection(self.host, self.port, timeout=2).request("/onSessionClose", b"{}")
                if status == 200 and len(self.worker_pids()) == self.workers:
                    return
            except OSError:
                pass
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"{self.kind} server did not answer on {self.host}:{self.port} within {timeout} s")

    # --- processes -------------------------------------------------------------------------

    def worker_pids(self) -> list[int]:
        return children(self.proc.pid)

    def cpu_seconds(self) -> float:
        """CPU (user + system) used so far by the master and its workers."""
        return sum(process_cpu(pid) for pid in [self.proc.pid, *self.worker_pids()])

    def stderr_tail(self, size: int = 3000) -> str:
        self.log.seek(0)
        return self.log.read().decode(errors="replace")[-size:]


def children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            found += [int(p) for p in (task / "children").read_text().split()]
        except OSError:
            pass
    return sorted(set(found))


def process_cpu(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def busy_cpu_seconds() -> float:
    """CPU seconds the whole machine spent busy (every process), from /proc/stat."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + fields[4]
    return (sum(fields[:8]) - idle) / CLK_TCK


def status_kb(pid: int, key: str) -> int:
    return _proc_kb(f"/proc/{pid}/status", key)


def lazyfree_kb(pid: int) -> int:
    """The process's pages advised ``MADV_FREE`` and not written since (``LazyFree`` of
    ``/proc/PID/smaps_rollup``): counted in its RSS until the kernel takes them back, e.g. the
    service's kept body maps (``keep_body_maps``)."""
    return _proc_kb(f"/proc/{pid}/smaps_rollup", "LazyFree")


def _proc_kb(path: str, key: str) -> int:
    """The kB figure of the ``key:`` line of a /proc file, 0 when it has none."""
    for line in Path(path).read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    return 0


def reset_peak_rss(pid: int) -> bool:
    """Resets VmHWM to the current RSS (Linux ``clear_refs`` 5); False where not allowed."""
    try:
        Path(f"/proc/{pid}/clear_refs").write_text("5")
        return True
    except OSError:
        return False


# --- the launcher: gunicorn with the service's settings and another app ----------------------

def gunicorn_settings(bind: str, workers: int, threads: int) -> dict:
    from policy_extender.config import Config
    from policy_extender.gunicorn_conf import settings
    chosen = settings(Config(bind=bind, workers=workers, threads=threads, log_level="warning"))
    return {k: v for k, v in chosen.items() if k not in ("on_starting", "child_exit", "worker_exit", "post_worker_init")}


def serve(app_spec: str, bind: str, workers: int, threads: int) -> None:
    from gunicorn.app.base import BaseApplication

    module_name, _, attr = app_spec.partition(":")

    class Launcher(BaseApplication):
        def load_config(self) -> None:
            for name, value in gunicorn_settings(bind, workers, threads).items():
                self.cfg.set(name, value)

        def load(self):
            return getattr(importlib.import_module(module_name), attr)

    Launcher().run()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.server", description=__doc__.splitlines()[0])
    parser.add_argument("app", help="MODULE:ATTRIBUTE of a WSGI app")
    parser.add_argument("--bind", default="127.0.0.1:8714")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--threads", type=int, default=4)
    args = parser.parse_args(argv)
    serve(args.app, args.bind, args.workers, args.threads)


if __name__ == "__main__":
    main()
