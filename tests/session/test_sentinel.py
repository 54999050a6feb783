"""The Redis store behind Sentinel: the address, and real failovers (a master, a replica and three
``redis-sentinel`` processes on loopback; the master SIGKILLed).

A session opened before a failover is lost for every store object, the ones that had read it
and one made afterwards alike (each ``SentinelStore`` is what one worker process has), until the
next open; with ``wait_replicas`` every event the store acknowledged is on the promoted replica.
"""

from __future__ import annotations

import subprocess
import time
import uuid

import pytest
import redis

from policy_extender.config import load
from policy_extender.session.redis import RedisStore, SentinelStore
from policy_extender.session.store import SessionLost, StoreUnavailable
from policy_extender.store_url import SentinelAddress, parse_sentinel_url

from tests.support.volcano import SentinelCluster, _wait_for_port, free_port

from .cluster import SOURCES, encode_snapshot
from .test_store_failures import cache_of, record


# -- the address -----------------------------------------------------------------------------


def test_a_sentinel_address_names_the_sentinels_the_master_and_the_database():
    assert parse_sentinel_url("redis+sentinel://:p%40ss@h1:26379,h2,[::1]:26380/mymaster/3"
                              "?sentinel_password=s") == SentinelAddress(
        (("h1", 26379), ("h2", 26379), ("::1", 26380)), "mymaster", 3, None, "p@ss", "s")
    assert parse_sentinel_url("redis+sentinel://u:p@h:1/m") == SentinelAddress((("h", 1),), "m", 0, "u", "p")


@pytest.mark.parametrize("url, says", [
    ("redis+sentinel://h:1", "master's name"),
    ("redis+sentinel://h:1/m/x", "database must be a number"),
    ("redis+sentinel://h:x/m", "port must be a number"),
    ("redis+sentinel://h:1,/m", "host is empty"),
    ("redis+sentinel://h:1/m?password=p", "unknown option 'password'"),
])
def test_a_malformed_sentinel_address_is_refused_at_start(url, says):
    with pytest.raises(ValueError, match=says):
        load({"session_store": url}, {})


# -- WAIT without replicas ---------------------------------------------------------------------


@pytest.mark.slow
def test_a_write_no_replica_acknowledged_is_unavailable_not_answered(redis_url):
    store = RedisStore(redis_url, prefix="wait-" + uuid.uuid4().hex, wait_replicas=1, wait_timeout=0.05)
    with pytest.raises(StoreUnavailable, match="acknowledged by 0 of the 1 replicas"):
        store.open(encode_snapshot(), "v1", SOURCES)
    session_id = store.head().session_id  # written on the master all the same
    with pytest.raises(StoreUnavailable, match="acknowledged by 0 of the 1"):
        store.allocate(session_id, "t1", record("t1"))


@pytest.mark.slow
def test_an_unreachable_redis_is_unavailable():
    store = RedisStore("redis://127.0.0.1:1/0", prefix="gone-" + uuid.uuid4().hex)
    with pytest.raises(StoreUnavailable, match="ConnectionError"):
        store.head()


# -- real failovers ----------------------------------------------------------------------------


@pytest.fixture
def cluster(tmp_path):
    cluster = SentinelCluster(tmp_path)
    yield cluster
    cluster.stop()


def settled(read, timeout: float = 30.0):
    """``read()`` once the store answers again after the failover (StoreUnavailable until then)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return read()
        except StoreUnavailable:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


@pytest.mark.slow
def test_a_session_opened_before_a_failover_is_lost_everywhere_until_the_next_open(cluster):
    prefix = "failover-" + uuid.uuid4().hex
    worker = SentinelStore(cluster.url, prefix=prefix)
    cache = cache_of(worker)
    session_id = worker.open(encode_snapshot(), "v1", SOURCES)
    assert worker.allocate(session_id, "t1", record("t1"))
    assert cache.env().counters.total.tasks == 1
    replica = redis.Redis(host="127.0.0.1", port=cluster.replica_port, socket_timeout=2)
    while replica.llen(worker._key + "log:" + session_id) < 1:  # replicated: nothing is lost but the master
        time.sleep(0.01)
    replica.close()
    cluster.kill_master()
    cluster.wait_for_failover()
    with pytest.raises(SessionLost, match="before a failover"):
        settled(cache.env)  # the worker that had read it
    late = SentinelStore(cluster.url, prefix=prefix)  # a worker or replica that never read it
    with pytest.raises(SessionLost, match="before a failover"):
        settled(late.head)
    opened = late.open(encode_snapshot(), "v1", SOURCES)  # the next cycle, on the new master
    assert worker.head().session_id == opened == cache.env().head.session_id
    assert worker.allocate(opened, "t3", record("t3"))
    assert cache.env().counters.total.tasks == 1


@pytest.mark.slow
def test_with_wait_every_acknowledged_event_is_on_the_promoted_replica(cluster):
    # each of the 200 events must be acknowledged within wait_timeout: generous, so that a loaded
    # machine (a replica not scheduled for 100 ms) does not fail a test about what a failover keeps
    store = SentinelStore(cluster.url, prefix="wait-" + uuid.uuid4().hex, wait_replicas=1, wait_timeout=10.0)
    session_id = store.open(encode_snapshot(), "v1", SOURCES)
    acknowledged = []
    for n in range(200):
        if store.allocate(session_id, f"t{n}", record(f"t{n}")):
            acknowledged.append(f"t{n}".encode())
    cluster.kill_master()
    cluster.wait_for_failover()
    promoted = redis.Redis(host="127.0.0.1", port=cluster.replica_port, socket_timeout=2)
    assert promoted.info("replication")["role"] == "master"
    stored = promoted.hkeys(store._key + "alloc:" + session_id)
    assert len(acknowledged) == 200 and set(acknowledged) <= set(stored)
    assert promoted.hget(store._key + "head", "sid") == session_id.encode()  # the open too
    promoted.close()



@pytest.fixture
def stale_sentinel(tmp_path):
    """``start(port)``: a real redis-sentinel whose configuration names the Redis at ``port`` as
    the master ``stale`` (as a sentinel does that has not heard of a failover yet: a non-leader
    during the leader's reconf-slaves phase, or one restarted with an old configuration file). It
    monitors under its own name, so the cluster's sentinels' hellos never update it, and it waits
    60 s before it calls anything down."""
    started = []

    def start(port: int) -> int:
        sentinel_port = free_port()
        conf = tmp_path / f"stale-sentinel-{sentinel_port}.conf"
        conf.write_text(f"port {sentinel_port}\nbind 127.0.0.1\ndir {tmp_path}\n"
                        f"sentinel monitor stale 127.0.0.1 {port} 1\n"
                        "sentinel down-after-milliseconds stale 60000\n")
        started.append(subprocess.Popen(["redis-sentinel", str(conf)], stdout=subprocess.DEVNULL,
                                        stderr=subprocess.STDOUT))
        _wait_for_port(sentinel_port)
        return sentinel_port

    yield start
    for process in started:
        process.terminate()
        process.wait(10)


@pytest.mark.slow
def test_the_demoted_master_back_as_a_replica_is_never_read_as_the_master(cluster, stale_sentinel):
    """The old master, restarted as a replica at its old address, holds the pre-failover head
    (stamped with that very address) once it synced from the new master. A store whose sentinel
    still names the old address must not read that head as current: the server that answers is a
    replica (``ROLE``), so the read fails (503) instead of deciding from the previous cycle."""
    prefix = "demoted-" + uuid.uuid4().hex
    store = SentinelStore(cluster.url, prefix=prefix)
    session_id = store.open(encode_snapshot(), "v1", SOURCES)
    replica = redis.Redis(host="127.0.0.1", port=cluster.replica_port, socket_timeout=2)
    while replica.hget(store._key + "head", "sid") != session_id.encode():
        time.sleep(0.01)
    cluster.kill_master()
    cluster.wait_for_failover()
    cluster.restart_killed_master_as_replica()  # as the pods' script does; in sync
    demoted = redis.Redis(host="127.0.0.1", port=cluster.master_port, socket_timeout=2)
    assert demoted.hget(store._key + "head", "master") == f"127.0.0.1:{cluster.master_port}".encode()
    assert demoted.info("replication")["role"] == "slave"
    demoted.close()
    replica.close()

    port = stale_sentinel(cluster.master_port)
    # a generous timeout: a sentinel just started on a loaded machine may take longer than 0.25 s
    late = SentinelStore(f"redis+sentinel://127.0.0.1:{port}/stale/0", prefix=prefix, timeout=2.0)
    with pytest.raises(StoreUnavailable, match=f"127.0.0.1:{cluster.master_port}.* is a replica of "
                                               f"127.0.0.1:{cluster.replica_port}"):
        late.head()
    with pytest.raises(StoreUnavailable):  # and the next call too: no sentinel names a master
        late.head()
    with pytest.raises(StoreUnavailable):
        late.open(encode_snapshot(), "v2", SOURCES)
    with pytest.raises(SessionLost, match="before a failover"):  # the sentinels that know: lost
        settled(SentinelStore(cluster.url, prefix=prefix).head)
