"""A real ``policy-extender serve`` (gunicorn) with extra flags (``--record ...``) on loopback."""

from __future__ import annotations

from pathlib import Path

from tests.support.volcano import Server


class RecordingServer(Server):
    """``Server`` with serve flags given positionally; ``stop()`` (SIGTERM) lets every worker
    write what it queued."""

    def __init__(self, state_dir: Path, policy_dir: Path, *flags: str, workers: int = 2) -> None:
        super().__init__(state_dir, policy_dir, workers=workers, threads=4, extra_args=flags)
