"""The guard that keeps the fast loop fast: a test not marked ``slow`` may not start a process
or open a network socket.

``bash scripts/test --fast`` runs ``pytest -m "not slow"``: the tests that need no server, no
subprocess, no Redis, Prometheus, valgrind or Go. This guard holds in every run, the full one CI
makes included, so a test that starts a process without the marker fails there too, not only
in someone's fast loop. What it catches, while a test not marked ``slow`` sets up, runs or tears
down:

- a process: ``subprocess`` (and so ``os.system``/``os.popen``), ``os.fork``/``forkpty``,
  ``os.posix_spawn``, ``os.exec*``, ``multiprocessing`` (fork, spawn and forkserver);
- a socket: ``connect`` or ``bind`` of an ``AF_INET``, ``AF_INET6`` or ``AF_UNIX`` socket.

``socket.socketpair()`` is allowed: it neither connects nor binds, opens no port and starts
nothing (the tests use it as an in-process stand-in for a client connection).

The checks are Python audit hooks (``sys.addaudithook``), which see the operation whatever
library makes it, plus ``_posixsubprocess.fork_exec``, which ``multiprocessing``'s spawn and
forkserver start methods call without an audit event. The hook raises in the offending call
and the test fails afterwards as well, so code that swallows the exception cannot hide it.
"""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

#: The audit events that start a process, and the sockets' families that open a network socket.
PROCESS_EVENTS = frozenset({"subprocess.Popen", "os.fork", "os.forkpty", "os.posix_spawn",
                            "os.system", "os.exec"})
SOCKET_EVENTS = frozenset({"socket.connect", "socket.bind"})
NETWORK_FAMILIES = frozenset({socket.AF_INET, socket.AF_INET6, socket.AF_UNIX})

HOW_TO_MARK = ("mark it @pytest.mark.slow (or the module: pytestmark = pytest.mark.slow); "
               "`bash scripts/test --fast` leaves slow tests out")


class FastTestViolation(RuntimeError):
    """A test not marked slow started a process or opened a socket."""


class Guard:
    """The test being guarded, if any, and what it did that a fast test may not."""

    def __init__(self) -> None:
        self.test: str | None = None
        self.violations: list[str] = []

    def check(self, what: str) -> None:
        if self.test is None:
            return
        message = f"{self.test} is not marked slow but {what}: {HOW_TO_MARK}"
        self.violations.append(message)
        raise FastTestViolation(message)

    def audit(self, event: str, args: tuple) -> None:
        if self.test is None:
            return
        if event in PROCESS_EVENTS:
            self.check(f"started a process ({event}{describe(event, args)})")
        elif event in SOCKET_EVENTS and args[0].family in NETWORK_FAMILIES:
            verb = event.split(".")[1]
            self.check(f"opened a network socket ({verb} {args[1]!r})")


def describe(event: str, args: tuple) -> str:
    """The program a process event runs, where the event says it."""
    if event in ("subprocess.Popen", "os.posix_spawn", "os.exec", "os.system") and args:
        return f" {args[0]!r}"
    return ""


GUARD = Guard()


#: Folders of tests/ whose every test is slow: their tests serve through real gunicorn.
SLOW_FOLDERS = ("served",)
TESTS = Path(__file__).resolve().parents[1]


def mark_slow_by_folder(items) -> None:
    """Mark slow every test of a folder of ``SLOW_FOLDERS`` (so none is marked by hand there)."""
    for item in items:
        where = Path(str(item.path)).resolve()
        if where.is_relative_to(TESTS) and where.relative_to(TESTS).parts[0] in SLOW_FOLDERS:
            item.add_marker(pytest.mark.slow)
