"""What every test of the suite gets: the fast-loop guard, the slow mark by folder, the app fixtures,
and a check that a test stops the service threads it started.

- The guard (``tests/support/fast_guard.py``): a test not marked ``slow`` may not start a process
  or open a network socket. ``bash scripts/test --fast`` runs ``pytest -m "not slow"``; the guard
  holds in every run, the full one CI makes included.
- Every test under ``tests/served/`` (a real ``policy-extender serve`` under gunicorn) is marked
  ``slow`` here, by its folder; a test elsewhere that starts a process or opens a socket marks itself.
- ``make_app``, ``app`` and ``client`` (``tests/support/app.py``): a fresh app per test.
"""

from __future__ import annotations

import threading
import sys

import _posixsubprocess
import pytest

from tests.support.fast_guard import GUARD, mark_slow_by_folder

pytest_plugins = ["tests.support.app"]

@pytest.hookimpl(tryfirst=True)  # before -m "not slow" deselects
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    mark_slow_by_folder(items)


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
