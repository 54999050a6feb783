"""SessionCache: one head() read per request; re-decode only on a new session, re-count only on a
new seq; exact counters per queue, job and node; safe under concurrent threads."""

from __future__ import annotations

import json
import threading

from policy_extender.session import SessionCache, decode_allocation, encode_allocation
from policy_extender.session.allocation import AllocationRecord

from .cluster import SOURCES, decode_snapshot, encode_snapshot

GPU = "nvidia.com/gpu"


def allocation(task_uid, job_uid="job-0", node="node-a", gpus=1.0, cpu=2.0):
    return encode_allocation(AllocationRecord(task_uid, job_uid, node, {GPU: gpus, "cpu": cpu}))


def cache_of(store):
    return SessionCache(store, decode_snapshot, decode_allocation)


def test_without_a_session_the_env_is_closed_and_empty(make_store):
    env = cache_of(make_store()).env()
    assert env.open is False
    assert env.job("job-0") is None and env.queue("queue-0") is None
    view = env.session_view("job-0", "queue-0", "node-a")
    assert view.open is False and view.allocated.tasks == 0 and view.queue.gpu == 0


def test_the_env_exposes_the_snapshot_jobs_and_queues(make_store):
    store = make_store()
    session_id = store.open(encode_snapshot(), "v1", SOURCES)
    env = cache_of(store).env()
    assert env.open is True
    assert (env.head.session_id, env.head.policy_version) == (session_id, "v1")
    assert env.job("job-1").queue_name == "queue-1"
    assert env.queue("queue-0").name == "queue-0"
    assert env.job("missing") is None and env.queue("missing") is None


def test_counters_per_queue_job_and_node(make_store):
    store = make_store()
    session_id = store.open(encode_snapshot(), "v1", SOURCES)
    store.allocate(session_id, "a", allocation("a", "job-0", "node-a", gpus=2))
    store.allocate(session_id, "b", allocation("b", "job-2", "node-b", gpus=1))
    store.allocate(session_id, "c", allocation("c", "job-1", "node-a", gpus=4))
    view = cache_of(store).env().session_view("job-0", None, "node-a")  # queue from the job
    assert view.open is True
    assert (view.allocated.tasks, view.allocated.gpu, view.allocated.cpu) == (3, 7, 6)
    assert (view.queue.tasks, view.queue.gpu) == (2, 3)      # job-0 and job-2 are in queue-0
    assert (view.job.tasks, view.job.gpu) == (1, 2)
    assert (view.node.tasks, view.node[GPU]) == (2, 6)
    assert view.queues["queue-1"].gpu == 4 and view.nodes["node-b"].tasks == 1
    assert view.jobs.get("job-3") is None and view.node.memory == 0


def test_identical_records_of_two_tasks_count_twice(make_store):
    store = make_store()
    session_id = store.open(encode_snapshot(), "v1", SOURCES)
    same = encode_allocation(AllocationRecord("", "job-0", "node-a", {GPU: 1.0}))
    store.allocate(session_id, "a", same)
    store.allocate(session_id, "b", same)
    assert cache_of(store).env().counters.total.gpu == 2


def test_snapshot_decoded_once_per_session_and_counters_once_per_seq(make_store):
    store = make_store()
    cache = cache_of(store)
    session_id = store.open(encode_snapshot(), "v1", SOURCES)
    for _ in range(5):
        cache.env()
    assert (cache.counts.snapshot_loads, cache.counts.change_loads) == (1, 1)
    store.allocate(session_id, "a", allocation("a"))
    store.allocate(session_id, "b", allocation("b"))
    for _ in range(5):
        assert cache.env().counters.total.tasks == 2
    store.allocate(session_id, "c", allocation("c"))
    assert cache.env().counters.total.tasks == 3
    assert (cache.counts.snapshot_loads, cache.counts.change_loads) == (1, 3)
    assert cache.counts.records_decoded == 3  # only the new event is read and decoded


def test_replaced_and_removed_allocations_move_the_counters(make_store):
    store = make_store()
    cache = cache_of(store)
    session_id = store.open(encode_snapshot(), "v1", SOURCES)
    store.allocate(session_id, "a", allocation("a", "job-0", "node-a", gpus=2, cpu=0.1))
    assert cache.env().counters.by_node["node-a"].gpu == 2
    store.allocate(session_id, "a", allocation("a", "job-1", "node-b", gpus=3, cpu=0.2))  # moved
    store.allocate(session_id, "b", allocation("b", "job-1", "node-b", gpus=1, cpu=0.1))
    counters = cache.env().counters
    assert "node-a" not in counters.by_node and "queue-0" not in counters.by_queue
    assert (counters.by_node["node-b"].tasks, counters.by_queue["queue-1"].gpu) == (2, 4)
    assert counters.total.cpu == 0.3
    store.deallocate(session_id, "a", allocation("a", "job-1", "node-b", gpus=3, cpu=0.2))
    store.deallocate(session_id, "b", allocation("b", "job-1", "node-b", gpus=1, cpu=0.1))
    counters = cache.env().counters
    assert (counters.total.tasks, counters.total.cpu, counters.by_job) == (0, 0, {})


def test_a_new_session_reloads_the_snapshot_and_resets_the_counters(make_store):
    store = make_store()
    cache = cache_of(store)
    first = store.open(encode_snapshot({"job-0": "queue-0"}), "v1", SOURCES)
    store.allocate(first, "a", allocation("a"))
    assert cache.env().counters.total.tasks == 1
    store.open(encode_snapshot({"job-0": "queue-9"}), "v2", SOURCES)
    env = cache.env()
    assert env.head.policy_version == "v2" and env.job("job-0").queue_name == "queue-9"
    assert env.counters.total.tasks == 0
    assert cache.counts.snapshot_loads == 2
    store.close()
    assert cache.env().open is False


def test_an_env_taken_by_a_request_does_not_change_under_it(make_store):
    store = make_store()
    cache = cache_of(store)
    session_id = store.open(encode_snapshot(), "v1", SOURCES)
    taken = cache.env()
    store.allocate(session_id, "a", allocation("a"))
    assert taken.counters.total.tasks == 0
    assert cache.env().counters.total.tasks == 1


def test_threads_share_one_cache_while_events_arrive(make_store):
    store = make_store()
    cache = cache_of(store)
    session_id = store.open(encode_snapshot(), "v1", SOURCES)
    done, failures = threading.Event(), []

    def read() -> None:
        last = 0
        while not done.is_set():
            tasks = cache.env().counters.total.tasks
            if tasks < last:
                failures.append((last, tasks))  # counters went backwards
            last = tasks

    readers = [threading.Thread(target=read) for _ in range(8)]
    for reader in readers:
        reader.start()
    for n in range(200):
        store.allocate(session_id, f"t{n}", allocation(f"t{n}"))
    done.set()
    for reader in readers:
        reader.join()
    assert failures == []
    assert cache.env().counters.total.tasks == 200
    assert cache.counts.snapshot_loads == 1


def test_the_default_decoders_read_what_the_service_writes(make_store):
    """The onSessionOpen handler stores ``wire.snapshot.from_open_body`` bytes and the allocate
    handler ``AllocationRecord``s; a cache built with no decoders reads both."""
    from policy_extender.wire.snapshot import from_open_body
    body = json.dumps({
        "Jobs": {"j1": {"UID": "j1", "Name": "train", "Namespace": "ml", "Queue": "gpu-q",
                        "MinAvailable": 2, "PodGroup": None}},
        "Queues": {"gpu-q": {"UID": "gpu-q", "Name": "gpu-q", "Weight": 3, "Queue": None}},
        "Nodes": {}, "NamespaceInfo": {}, "RevocableNodes": {}}).encode()
    store = make_store()
    session_id = store.open(from_open_body(body), "v1", SOURCES)
    store.allocate(session_id, "t1", allocation("t1", "j1", "node-a", gpus=2))
    env = SessionCache(store).env()
    assert env.job("j1").queue_name == "gpu-q" and env.queue("gpu-q").name == "gpu-q"
    view = env.session_view("j1", None, "node-a")
    assert (view.queue.gpu, view.job.tasks, view.node.cpu) == (2, 1, 2)
