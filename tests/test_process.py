"""``policy_extender.process.pid``: this process's id without a system call, right after a fork."""

import ast
import os
from pathlib import Path

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


def fork_checks_by_another_idiom(source: str) -> list[str]:
    """Comparisons that ask "did this process fork" another way than ``kept != process.pid``:
    with ``os.getpid()`` (a system call each time), or with ``is``/``is not`` (true of equal ints
    by accident of caching)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Compare):
            continue
        parts = [node.left, *node.comparators]
        calls = [n for part in parts for n in ast.walk(part)
                 if isinstance(n, ast.Call) and ast.unparse(n.func) == "os.getpid"]
        pids = [n for part in parts for n in ast.walk(part) if ast.unparse(n) == "process.pid"]
        if calls or (pids and any(isinstance(op, (ast.Is, ast.IsNot)) for op in node.ops)):
            found.append(f"line {node.lineno}: {ast.unparse(node)}")
    return found


def test_every_fork_check_compares_with_process_pid():
    package = Path(process.__file__).parent
    wrong = {str(path.relative_to(package)): found for path in sorted(package.rglob("*.py"))
             if (found := fork_checks_by_another_idiom(path.read_text(encoding="utf-8")))}
    assert not wrong, f"a fork check is `kept != process.pid`: {wrong}"


def test_the_fork_check_reader_sees_both_other_idioms():
    assert len(fork_checks_by_another_idiom("a = b != os.getpid()\nc = d is not process.pid\ne = f != process.pid")) == 2
