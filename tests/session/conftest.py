"""Stores under test: a real SQLite file and a real redis-server started for the test session."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
import uuid

import pytest
import redis

from policy_extender.session.redis import RedisStore
from policy_extender.session.sqlite import SqliteStore

#: redis is marked slow: it needs the redis-server this module starts (the fast loop has no server).
STORE_KINDS = ("sqlite", pytest.param("redis", marks=pytest.mark.slow))


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _start_redis(binary: str, directory) -> tuple[subprocess.Popen, int]:
    """A redis-server on a free loopback port; retried if another process took the port first."""
    for _ in range(5):
        port = _free_port()
        process = subprocess.Popen(
            [binary, "--port", str(port), "--bind", "127.0.0.1", "--dir", str(directory),
             "--save", "", "--appendonly", "no"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if _answers(port, process):
            return process, port
        process.kill()
        process.wait()
    raise RuntimeError("redis-server did not start on any of 5 free ports")


def _answers(port: int, process: subprocess.Popen) -> bool:
    client = redis.Redis(host="127.0.0.1", port=port)
    for _ in range(100):
        if process.poll() is not None:
            return False
        try:
            return bool(client.ping())
        except redis.ConnectionError:
            time.sleep(0.05)
    return False


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory):
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.skip("redis-server is not installed: the RedisStore tests need a real server "
                    "(apt-get install redis-server; CI does this in .ci/run)")
    process, port = _start_redis(binary, tmp_path_factory.mktemp("redis"))
    yield f"redis://127.0.0.1:{port}/0"
    process.terminate()
    process.wait(timeout=10)


@pytest.fixture
def make_store(request, tmp_path):
    """``make_store(ttl_seconds=...)`` -> a store of the parametrized kind, empty at the first
    call; further calls in the same test reach the same data (as another worker would)."""
    kind, prefix = request.param, "test-" + uuid.uuid4().hex

    def make(ttl_seconds: float = 300.0):
        if kind == "sqlite":
            return SqliteStore(str(tmp_path / "session.sqlite3"), ttl_seconds=ttl_seconds)
        url = request.getfixturevalue("redis_url")
        return RedisStore(url, ttl_seconds=ttl_seconds, prefix=prefix)

    return make


def pytest_generate_tests(metafunc):
    if "make_store" in metafunc.fixturenames:
        metafunc.parametrize("make_store", STORE_KINDS, indirect=True)
