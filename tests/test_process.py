"""``policy_extender.process.pid``: this process's id without a system call, right after a fork."""

import os

import pytest

from policy_extender import process
from tests.support.forking import in_forked_child


def test_pid_is_the_process_id():
    assert process.pid == os.getpid()


@pytest.mark.slow
def test_a_forked_child_sees_its_own_pid():
    got = in_forked_child(lambda: f"{process.pid} {os.getpid()}")
    kept, real = got.split()
    assert kept == real
    assert int(kept) != os.getpid()


@pytest.mark.slow
def test_a_grandchild_sees_its_own_pid():
    got = in_forked_child(lambda: in_forked_child(lambda: f"{process.pid} {os.getpid()}"))
    kept, real = got.split()
    assert kept == real and int(kept) != os.getpid()
