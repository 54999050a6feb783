"""The guard of tests/conftest.py (tests/support/fast_guard.py): a test not marked slow that starts a process or opens a
network socket is stopped, with a message naming what it did and how to mark it."""

from __future__ import annotations

import multiprocessing
import os
import socket
import subprocess
from pathlib import Path

import pytest

from tests.support.fast_guard import GUARD, TESTS, FastTestViolation, mark_slow_by_folder

HOW = r"is not marked slow but .*mark it @pytest.mark.slow"


@pytest.fixture
def forgive():
    """These tests break the rule on purpose: ``forgive()`` clears what the guard noted, which
    would otherwise fail them once their call ends."""
    return GUARD.violations.clear


def test_a_subprocess_is_stopped_and_named(forgive):
    with pytest.raises(FastTestViolation, match=HOW) as caught:
        subprocess.run(["true"], check=True)
    assert "started a process (subprocess.Popen" in str(caught.value) and "true" in str(caught.value)
    assert "test_a_subprocess_is_stopped_and_named" in str(caught.value)
    forgive()


def test_a_fork_is_stopped(forgive):
    with pytest.raises(FastTestViolation, match=r"started a process \(os.fork"):
        if os.fork() == 0:  # only if the guard let it through: the child must not run the suite
            os._exit(0)
    forgive()


def test_a_spawned_multiprocessing_process_is_stopped(forgive):
    process = multiprocessing.get_context("spawn").Process(target=print)
    with pytest.raises(FastTestViolation, match="multiprocessing"):
        process.start()
    forgive()


@pytest.mark.parametrize("family, address", [(socket.AF_INET, ("127.0.0.1", 0)),
                                              (socket.AF_INET6, ("::1", 0))], ids=["inet", "inet6"])
def test_binding_a_network_socket_is_stopped(forgive, family, address):
    with socket.socket(family) as sock:
        with pytest.raises(FastTestViolation, match=r"opened a network socket \(bind"):
            sock.bind(address)
    forgive()


def test_connecting_to_a_server_is_stopped(forgive):
    with socket.socket(socket.AF_INET) as sock:
        with pytest.raises(FastTestViolation, match=r"opened a network socket \(connect \('127.0.0.1', 9\)"):
            sock.connect(("127.0.0.1", 9))
    forgive()


def test_a_unix_socket_is_stopped(forgive, tmp_path):
    with socket.socket(socket.AF_UNIX) as sock:
        with pytest.raises(FastTestViolation, match="opened a network socket"):
            sock.bind(str(tmp_path / "server.sock"))
    forgive()


def test_a_socketpair_is_allowed_it_opens_no_port_and_starts_nothing():
    left, right = socket.socketpair()
    with left, right:
        left.sendall(b"ping")
        assert right.recv(4) == b"ping"


def test_a_swallowed_violation_still_fails_the_test(forgive):
    try:
        subprocess.run(["true"])
    except Exception:
        pass  # code under test that catches everything cannot hide the process it started
    assert GUARD.violations and "subprocess.Popen" in GUARD.violations[0]  # fails it at the end
    forgive()


@pytest.mark.slow
def test_a_slow_test_may_start_processes_and_open_sockets():
    assert subprocess.run(["true"]).returncode == 0
    with socket.socket(socket.AF_INET) as sock:
        sock.bind(("127.0.0.1", 0))


def test_the_collection_hook_marks_slow_every_test_of_tests_served_and_no_other():
    class Item:
        def __init__(self, path: Path) -> None:
            self.path, self.marks = path, list[str]()

        def add_marker(self, mark) -> None:
            self.marks.append(mark.name)

    served, web = Item(TESTS / "served" / "test_e2e.py"), Item(TESTS / "web" / "test_verbs.py")
    mark_slow_by_folder([served, web])
    assert served.marks == ["slow"] and web.marks == []


def test_no_test_of_tests_served_marks_itself_slow():
    folder = Path(__file__).resolve().parent / "served"
    marked = [p.name for p in folder.glob("test_*.py") if "mark.slow" in p.read_text(encoding="utf-8")]
    assert len(list(folder.glob("test_*.py"))) > 10 and not marked, marked
