"""``policy_extender.process.pid``: this process's id without a system call, right after a fork."""

import os

import pytest

from policy_extender import process


def _in_child(read) -> str:
    """What ``read()`` gives in a child made by ``os.fork``."""
    r, w = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - the child reports through the pipe
        try:
            os.write(w, read().encode())
        finally:
            os._exit(0)
    os.close(w)
    try:
        with os.fdopen(r, "rb") as pipe:
            return pipe.read().decode()
    finally:
        os.waitpid(child, 0)


def test_pid_is_the_process_id():
    assert process.pid == os.getpid()


@pytest.mark.slow
def test_a_forked_child_sees_its_own_pid():
    got = _in_child(lambda: f"{process.pid} {os.getpid()}")
    kept, real = got.split()
    assert kept == real
    assert int(kept) != os.getpid()


@pytest.mark.slow
def test_a_grandchild_sees_its_own_pid():
    got = _in_child(lambda: _in_child(lambda: f"{process.pid} {os.getpid()}"))
    kept, real = got.split()
    assert kept == real and int(kept) != os.getpid()
