"""A real small file system for disk-full tests: a tmpfs of a few hundred KiB mounted for the test
(the tests run as root, as CI does), unmounted after it. Nothing is mocked: SQLite's writes fail
with ENOSPC from the kernel, as on a full volume."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def small_tmpfs(directory: Path, size: str) -> Iterator[Path]:
    """``directory`` (made if missing) with a tmpfs of ``size`` (``mount``'s form: 1m, 512k)
    mounted on it while the block runs. Fails, saying why, where mounting is not allowed."""
    directory.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0:
        raise RuntimeError("the disk-full tests mount a small tmpfs and need root (CI runs as root)")
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs", str(directory)],
                   check=True, capture_output=True)
    try:
        yield directory
    finally:
        subprocess.run(["umount", "-l", str(directory)], check=False, capture_output=True)
