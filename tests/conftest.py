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
import threading
import sys

import _posixsubprocess
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


def pytest_configure(config: pytest.Config) -> None:
    sys.addaudithook(GUARD.audit)
    fork_exec = _posixsubprocess.fork_exec

    def guarded_fork_exec(*args, **kwargs):
        GUARD.check("started a process (_posixsubprocess.fork_exec, as multiprocessing does)")
        return fork_exec(*args, **kwargs)

    _posixsubprocess.fork_exec = guarded_fork_exec


def guarded(item: pytest.Item):
    """Run one phase of ``item`` under the guard unless it is marked slow."""
    if item.get_closest_marker("slow") is not None:
        return (yield)
    GUARD.test = item.nodeid
    GUARD.violations.clear()
    try:
        result = yield
    finally:
        GUARD.test = None
    if GUARD.violations:
        pytest.fail("\n".join(dict.fromkeys(GUARD.violations)), pytrace=False)
    return result


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item):
    return (yield from guarded(item))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item):
    return (yield from guarded(item))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item):
    return (yield from guarded(item))


#: The threads a service (or its tally, reloader, recorder) starts; a test stops what it started.
SERVICE_THREADS = frozenset({"policy-extender-tally", "policy-reloader", "policy-extender-recorder"})


@pytest.fixture(autouse=True)
def service_threads_stopped():
    """Fails a test that leaves a service's thread running (``Service.stop()``, ``tally.close()``).

    A leaked tally flusher writes to its SQLite file in the background for the rest of the run;
    forked at the wrong moment, a later test's child inherits SQLite's mutex held by it and
    deadlocks (CI hung that way once). Torn down after the test's own fixtures."""
    before = set(threading.enumerate())
    yield
    left = sorted(t.name for t in threading.enumerate()
                  if t not in before and t.name in SERVICE_THREADS and t.is_alive())
    if left:
        pytest.fail(f"the test left these threads running: {left}; stop what it started "
                    "(service.stop(), tally.close())", pytrace=False)
