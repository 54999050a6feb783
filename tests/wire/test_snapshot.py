"""onSessionOpen pruned to msgpack and back; allocations from allocate events."""

import json

import pytest

from policy_extender.wire import snapshot
from policy_extender.wire.decode import decode_placed_task, decode_task_event
from policy_extender.errors import WireError
from policy_extender.wire.session_views import SnapshotEnv

from tests.support.bodies import sample

JOB_002 = "ml/job-002-8379799c-38b5-481a-ad2d-f76627ecc4bd"


def test_snapshot_is_much_smaller_than_the_body(full):
    body = sample("onSessionOpen")
    data = snapshot.from_open_body(body, full)
    assert len(data) * 10 < len(body)
    assert len(snapshot.from_open_body(body, {})) < len(data)


def test_snapshot_round_trip_gives_jobs_and_queues(full):
    loaded = snapshot.load_snapshot(snapshot.from_open_body(sample("onSessionOpen"), full))
    sent = json.loads(sample("onSessionOpen"))
    assert set(loaded.jobs) == set(sent["Jobs"])
    assert set(loaded.queues) == {q["Name"] for q in sent["Queues"].values()}
    job = loaded.job(JOB_002)
    assert job.min_available == 3 and job.queue_name == "restricted"
    assert job.queue.name == "restricted" and job.queue.capability.cpu == 64
    assert job.queue.capability.memory == 256 * 2**30
    assert loaded.queue("gpu-batch").capability.gpu == 32
    assert loaded.queue("gpu-batch").weight == 4


def test_snapshot_loaded_equals_decoded_directly(full):
    body = sample("onSessionOpen")
    direct = snapshot.decode_session_open(body, full)
    loaded = snapshot.load_snapshot(snapshot.from_open_body(body, full))
    for uid, job in direct.jobs.items():
        other = loaded.jobs[uid]
        assert (job.min_resources, job.ready_tasks, job.pending_tasks, job.phase, job.labels) == \
               (other.min_resources, other.ready_tasks, other.pending_tasks, other.phase, other.labels)
        assert [t.requests for t in job.tasks] == [t.requests for t in other.tasks]


def test_snapshot_pruned_to_minimal_reads_keeps_identity_and_required_fields_only():
    loaded = snapshot.load_snapshot(snapshot.from_open_body(sample("onSessionOpen"), {}))
    job = loaded.job(JOB_002)
    assert job.queue_name == "restricted" and job.tasks == []
    assert job.min_available == 3  # required (structs.REQUIRED), so always kept


def test_task_job_and_queue_resolve_through_the_env(full):
    env = SnapshotEnv(*_jobs_queues(full))
    task = decode_task_event(sample("allocateFunc"), full, env).task
    assert task.job.uid == JOB_002 and task.job.min_available == 3
    assert task.queue.name == "restricted" and task.job.queue.name == "restricted"


def _jobs_queues(reads):
    loaded = snapshot.decode_session_open(sample("onSessionOpen"), reads)
    return loaded.jobs, loaded.queues


def test_allocation_from_task_is_whole_units(full):
    task = decode_task_event(sample("allocateFunc"), full).task
    found = snapshot.allocation_from_task(task)
    assert found.task_uid == task.uid and found.job_uid == JOB_002 and found.node_name == "node-0000"
    assert found.resources == {"cpu": 2, "memory": 8 * 2**30, "nvidia.com/gpu": 2, "pods": 1}


def test_decode_placed_task_finds_the_queue_in_the_snapshot(full):
    loaded = snapshot.decode_session_open(sample("onSessionOpen"), full)
    allocation = decode_placed_task(sample("allocateFunc"), full, loaded)
    assert allocation.queue_name == "restricted"
    env = SnapshotEnv(loaded.jobs, loaded.queues, [allocation])
    view = env.session_view(JOB_002, "restricted", "node-0000")
    assert view.open and view.allocated.tasks == 1 and view.queue.gpu == 2 and view.node.cpu == 2
    assert view.queues["restricted"].memory == 8 * 2**30 and view.jobs[JOB_002].tasks == 1


def test_empty_jobs_and_queues_make_an_empty_snapshot(full):
    loaded = snapshot.load_snapshot(snapshot.from_open_body(b'{"Jobs": {}, "Queues": {}, "Nodes": {}}', full))
    assert loaded.jobs == {} and loaded.queues == {} and loaded.job("x") is None


@pytest.mark.parametrize("body,message", [
    (b'{"Queues": {}, "Nodes": {}}', "$.Jobs: missing: expected an object"),
    (b'{"Jobs": null, "Queues": {}, "Nodes": {}}', "$.Jobs: expected object, got null"),
    (b'{"Jobs": {}, "Queues": {}}', "$.Nodes: missing: expected an object"),
    (b'{"Jobs": {}, "Queues": {}, "Nodes": []}', "$.Nodes: expected object, got array"),
    (b'{"Jobs": {}, "Queues": {}, "Nodes": {"n1": 5}}', "$.Nodes[...]: expected object, got integer"),
    (b'{"Jobs": {}, "Nodes": {}}', "$.Queues: missing: expected an object"),
    (b'{"Jobs": {}, "Queues": "q", "Nodes": {}}', "$.Queues: expected object, got string"),
    (b'{"Jobs": {"j": {"UID": "j", "Queue": "q"}}, "Queues": {}, "Nodes": {}}',
     "$.Jobs[...].MinAvailable: missing: expected an integer"),
    (b'{"Jobs": {"j": {"UID": "", "Queue": "q", "MinAvailable": 1}}, "Queues": {}, "Nodes": {}}',
     "$.Jobs[...].UID: expected a non-empty string"),
    (b'{"Jobs": {}, "Queues": {"q": {"UID": "q"}}, "Nodes": {}}', "$.Queues[...].Name: missing"),
    (b'null', "$: expected object, got null"), (b'', "$: empty body"),
])
def test_an_open_without_its_maps_or_their_keys_is_refused(body, message):
    """Jobs, Nodes and Queues are always sent (non-nil maps); without them an open would replace
    the live session with an empty one. The jobs' and queues' identity fields are required whatever
    the policies read (here nothing: a rule that reads more requires more, tests/wire/test_decode.py)."""
    with pytest.raises(WireError) as error:
        snapshot.from_open_body(body, {})
    assert str(error.value).startswith(message)


def test_a_node_of_the_open_is_checked_but_never_parsed(full):
    body = b'{"Jobs": {}, "Queues": {}, "Nodes": {"n1": {"Name": 7, "Tasks": "anything"}, "n2": null}}'
    assert snapshot.load_snapshot(snapshot.from_open_body(body, full)).jobs == {}


@pytest.mark.parametrize("jobs", [
    {"uid-1": {"UID": "uid-1", "Name": "a"}, "uid-2": {"UID": "uid-2", "Name": "b"}},
    {"uid-1": {"UID": "uid-1", "Name": "a"}, "": {"Name": "keyless"}},  # a job under "" (malformed)
])
def test_a_job_is_found_by_its_uid_and_the_empty_uid_finds_none(jobs):
    """``job()`` is the jobs map's own ``get`` when no job sits under "" (one C call per
    predicate), the method otherwise: both answer None for "" and for an unknown UID."""
    loaded = snapshot.Snapshot(jobs, {})
    assert loaded.job("uid-1").name == "a"
    assert loaded.job("") is None and loaded.job("nope") is None and loaded.job(None) is None
    assert ("" in loaded.jobs) == ("" in jobs)
