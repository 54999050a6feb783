"""A real ``policy-extender serve`` (gunicorn) with extra flags (``--record ...``) on loopback."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.web.volcano import VolcanoClient, free_port

REPO = Path(__file__).resolve().parents[2]


class RecordingServer:
    def __init__(self, state_dir: Path, policy_dir: Path, *flags: str, workers: int = 2) -> None:
        self.port = free_port()
        self.log_path = state_dir / f"server-{self.port}.log"
        args = [sys.executable, "-m", "policy_extender", "serve", "--bind", f"127.0.0.1:{self.port}",
                "--workers", str(workers), "--threads", "4", "--policy-dirs", str(policy_dir),
                "--session-store", f"sqlite:{state_dir / f'sessions-{self.port}.sqlite'}",
                "--reload-interval", "0", *flags]
        env = {**os.environ, "PYTHONPATH": str(REPO),
               "PROMETHEUS_MULTIPROC_DIR": str(state_dir / f"metrics-{self.port}")}
        self._log = open(self.log_path, "wb")
        self.process = subprocess.Popen(args, cwd=state_dir, env=env, stdout=self._log,
                                        stderr=subprocess.STDOUT)

    def wait_ready(self, timeout: float = 30.0) -> None:
        client = VolcanoClient(self.port, timeout=2)
        deadline = time.monotonic() + timeout
        try:
            while time.monotonic() < deadline:
                if self.process.poll() is not None:
                    raise RuntimeError(self.log_path.read_text(errors="replace"))
                try:
                    if client.get("/readyz")[0] == 200:
                        return
                except OSError:
                    pass
                time.sleep(0.05)
        finally:
            client.close()
        raise TimeoutError(self.log_path.read_text(errors="replace"))

    def stop(self) -> None:
        """SIGTERM: gunicorn stops its workers gracefully, and each writes what it queued."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._log.close()
