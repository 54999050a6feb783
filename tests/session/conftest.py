"""Stores under test: every kind the scheme registry lists (``store_url.SCHEMES``), each opened
through the registry as the service opens it (``open_store``): a real SQLite file, a real
redis-server, and a real Redis master with a replica behind three real sentinels, all started for
the test session.

Every test of this directory taking ``make_store`` is the store contract suite: it runs once per
registered kind, so a kind added to the registry is tested without a line here, except the
entry of ``TEST_SETTINGS`` that says how a test gets an empty store of that kind (without one,
its contract tests fail and say so).
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time

import pytest
import redis

from policy_extender.session.factory import open_store

from tests.support.stores import TEST_SETTINGS, store_kinds

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
def redis_setting(redis_url):
    """The redis-server's URL, its database emptied: a fresh store under the default prefix."""
    client = redis.Redis.from_url(redis_url)
    client.flushdb()
    client.close()
    return redis_url


@pytest.fixture(scope="session")
def sentinel_cluster(tmp_path_factory):
    """A master, a replica and three sentinels for the whole test session. No failover is made
    on it (tests/session/test_sentinel.py makes its own clusters for that): the sentinels wait
    30 s before they call the master down, so a slow machine never triggers one."""
    if shutil.which("redis-server") is None or shutil.which("redis-sentinel") is None:
        pytest.skip("redis-server and redis-sentinel are not installed: the SentinelStore tests need "
                    "real servers (apt-get install redis-server redis-sentinel; scripts/test does this)")
    from tests.support.volcano import SentinelCluster

    cluster = SentinelCluster(tmp_path_factory.mktemp("sentinel"), down_after_ms=30_000)
    yield cluster
    cluster.stop()


@pytest.fixture
def sentinel_setting(sentinel_cluster):
    """The cluster's Sentinel address, the master's database emptied (the replica follows)."""
    client = redis.Redis(host="127.0.0.1", port=sentinel_cluster.master_port)
    client.flushdb()
    client.close()
    return sentinel_cluster.url


@pytest.fixture
def sqlite_setting(tmp_path):
    return f"sqlite:{tmp_path / 'session.sqlite3'}"


@pytest.fixture
def make_store(request):
    """``make_store(ttl_seconds=...)`` -> a store of the parametrized kind, opened through the
    registry with ``open_store``, empty at the first call; further calls in the same test reach
    the same data (as another worker would)."""
    kind = request.param
    if kind not in TEST_SETTINGS:
        pytest.fail(f"the store kind {kind!r} is registered in store_url.SCHEMES but the contract "
                    "suite cannot make one: add it to TEST_SETTINGS in tests/support/stores.py, "
                    "with a fixture giving the setting of an empty store of that kind")
    setting = request.getfixturevalue(TEST_SETTINGS[kind][0])

    def make(ttl_seconds: float = 300.0):
        return open_store(setting, ttl_seconds=ttl_seconds)

    return make


def pytest_generate_tests(metafunc):
    if "make_store" in metafunc.fixturenames:
        metafunc.parametrize("make_store", store_kinds(), indirect=True)
