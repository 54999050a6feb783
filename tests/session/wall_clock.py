"""A process tree whose wall clock is stepped, the machine's clock left alone: a small preload
library (``wall_clock_shim.c``, built here with the machine's C compiler into a cache directory)
adds the seconds written in a file to CLOCK_REALTIME (``clock_gettime``, ``gettimeofday``,
``time``); CLOCK_MONOTONIC, CLOCK_BOOTTIME and sleeping go on untouched, as on a host whose NTP
daemon steps the time or whose VM was resumed. (libfaketime cannot do this with Python 3.11:
with its monotonic clocks left alone, ``time.sleep`` fails with EINVAL.)"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

SOURCE = Path(__file__).with_name("wall_clock_shim.c")


def shim() -> Path:
    """The built library (rebuilt when the source changes)."""
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        raise RuntimeError("no C compiler (cc) to build the wall-clock shim: apt-get install gcc")
    digest = hashlib.sha256(SOURCE.read_bytes()).hexdigest()[:16]
    built = Path(tempfile.gettempdir()) / f"policy-extender-wall-clock-{digest}.so"
    if not built.exists():
        partial = built.with_suffix(f".{digest}.tmp")
        subprocess.run([compiler, "-shared", "-fPIC", "-O2", "-o", str(partial), str(SOURCE), "-ldl"],
                       check=True, capture_output=True)
        partial.replace(built)
    return built


def stepped_clock_env(offset_file: Path, seconds: float = 0.0) -> dict[str, str]:
    """The environment variables that make a process (and its children) see the wall clock
    ``seconds`` ahead, and whatever :func:`step` writes later."""
    step(offset_file, seconds)
    return {"LD_PRELOAD": str(shim()), "WALL_CLOCK_OFFSET_FILE": str(offset_file)}


def step(offset_file: Path, seconds: float) -> None:
    """Step the wall clock of every process started with :func:`stepped_clock_env` to ``seconds``
    ahead of the machine's; returns once every such process sees it (they re-read the file at
    most 20 ms after a read)."""
    partial = offset_file.with_suffix(".new")
    partial.write_text(f"{seconds}\n")
    partial.replace(offset_file)
    time.sleep(0.05)
