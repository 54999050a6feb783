"""A Redis failover under Sentinel in the middle of a cycle, under real gunicorn: two
``policy-extender serve`` instances (2 workers each) share sessions through a master, a replica
and three sentinels, all real servers on loopback. The master is SIGKILLed mid-cycle.

Every answer of that cycle is a 503 or right (a score that counts every acknowledged allocate of
the cycle and reads its snapshot), never a decision made without the session it had; with
``--redis-wait-replicas 1`` every acknowledged allocate is on the promoted replica; and the next
cycle is right on every worker of both instances.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter

import pytest
import redis

from tests.support.bodies import SAMPLES
from tests.support.policies import write_policies
from tests.support.volcano import SentinelCluster, Server, VolcanoClient

JOB = "ml/job-002-8379799c-38b5-481a-ad2d-f76627ecc4bd"  # the sample prioritize's task's job
#: every node scores 1000 per task allocated in the cycle plus the task's job's gang size
POLICIES = {"count.policy": "score session.allocated.tasks * 1000 + task.job.min_available\n"}
PRIORITIZES = 8  # per instance, after each allocate


def body(verb: str) -> dict:
    return json.loads((SAMPLES / f"{verb}.json").read_bytes())


def open_body(min_available: int) -> bytes:
    opened = body("onSessionOpen")
    opened["Jobs"][JOB]["MinAvailable"] = min_available
    return json.dumps(opened).encode()


def allocate_body(n: int) -> bytes:
    event = body("allocateFunc")
    event["task"]["UID"] = f"failover-task-{n}"
    return json.dumps(event).encode()


PRIORITIZE = json.dumps(body("prioritize")).encode()


class Cycle:
    """Drives one cycle against both instances and sorts every answer: 200 and right, 503, or
    wrong (any other status, or a 200 whose score is not the expected one)."""

    def __init__(self, clients: list[VolcanoClient], min_available: int) -> None:
        self.clients, self.min_available = clients, min_available
        self.acknowledged: list[str] = []
        self.answers: Counter = Counter()
        self.wrong: list[str] = []
        self.causes: Counter = Counter()  # of the 503s

    def open(self) -> None:
        status, answer = self.clients[0].raw("onSessionOpen", open_body(self.min_available), fresh=True)
        assert status == 200, answer

    def step(self, n: int) -> None:
        """One allocate, then PRIORITIZES prioritize calls on new connections to each instance."""
        status, answer = self.clients[n % 2].raw("allocateFunc", allocate_body(n), fresh=True)
        self._sort("allocateFunc", status, answer, want=None)
        if status == 200:
            self.acknowledged.append(f"failover-task-{n}")
        want = 1000 * len(self.acknowledged) + self.min_available
        for client in self.clients:
            for status, answer in client.parallel_map(lambda _: client.raw("prioritize", PRIORITIZE, fresh=True),
                                                      range(PRIORITIZES)):
                self._sort("prioritize", status, answer, want)

    def _sort(self, verb: str, status: int, answer: bytes, want: int | None) -> None:
        if status == 503:
            self.answers["503"] += 1
            self.causes[_cause(answer)] += 1
            return
        right = status == 200 and (want is None or set(json.loads(answer)["nodeScore"].values()) == {want})
        self.answers["200 right" if right else "wrong"] += 1
        if not right:
            self.wrong.append(f"{verb}: {status} {answer[:300]!r} (want {want})")


def _cause(answer: bytes) -> str:
    text = json.loads(answer)["error"]
    if "before a failover" in text:
        return "opened before the failover"
    if "unavailable" in text:
        return "store unavailable"
    return text[:80]


@pytest.fixture
def cluster(tmp_path):
    cluster = SentinelCluster(tmp_path)
    yield cluster
    cluster.stop()


@pytest.mark.parametrize("wait", [False, True], ids=["async-replication", "wait-for-a-replica"])
def test_a_master_killed_mid_cycle_fails_the_cycle_over_to_503s_and_the_next_cycle_is_right(tmp_path, cluster, wait):
    policies = write_policies(tmp_path / "policies", POLICIES)
    # each acknowledged write waits for the replica up to --redis-wait-timeout: generous (the
    # default 0.1 s fails writes on a loaded machine before any failover, which is not this test's case)
    extra = ("--redis-wait-replicas", "1", "--redis-wait-timeout", "3") if wait else ()
    servers = [Server(tmp_path, policies, cluster.url, workers=2, extra_args=extra) for _ in range(2)]
    clients = []
    try:
        for server in servers:
            server.wait_ready()
        clients = [VolcanoClient(server.port, timeout=10) for server in servers]

        first = Cycle(clients, min_available=3)
        first.open()
        session_id = clients[0].get("/status")[1]["session"]["id"]
        for n in range(5):
            first.step(n)
        assert first.answers == {"200 right": 5 * (1 + 2 * PRIORITIZES)}, first.wrong
        first.answers = Counter()  # from the kill on

        cluster.kill_master()
        failed_over = threading.Event()
        took: list[float] = []
        watcher = threading.Thread(target=lambda: (took.append(cluster.wait_for_failover()), failed_over.set()))
        watcher.start()
        n, after = 5, None
        while after is None or time.monotonic() < after + 2.0:  # through the failover, and 2 s on
            first.step(n)
            n += 1
            if after is None and failed_over.is_set():
                after = time.monotonic()
        watcher.join()
        print(f"\nfailover ({'WAIT 1' if wait else 'asynchronous replication'}) in {took[0]:.2f} s; "
              f"{n - 5} steps from the kill to 2 s after the failover; the cycle's answers from the kill "
              f"on: {dict(first.answers)} (the 503s: {dict(first.causes)}); allocates acknowledged in "
              f"the cycle: {len(first.acknowledged)}")
        assert first.wrong == []
        assert first.answers["503"] > 0  # the kill was in the cycle

        if wait:  # every allocate answered 200 is on the promoted replica
            promoted = redis.Redis(host="127.0.0.1", port=cluster.replica_port, socket_timeout=2)
            stored = {uid.decode() for uid in promoted.hkeys("{policy-extender}:alloc:" + session_id)}
            promoted.close()
            assert set(first.acknowledged) <= stored

        cluster.restart_killed_master()  # a replica again, for the next cycle's WAIT
        second = Cycle(clients, min_available=7)  # the next cycle, opened on the new master
        second.open()
        for n in range(100, 105):
            second.step(n)
        print(f"the next cycle: {dict(second.answers)}")
        assert second.wrong == [] and second.answers == {"200 right": 5 * (1 + 2 * PRIORITIZES)}
        assert len(second.acknowledged) == 5
    finally:
        for client in clients:
            client.close()
        for server in servers:
            server.stop()
