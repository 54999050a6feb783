"""Compact input -> wire bodies shaped like the samples -> decoded views with the same values."""

import json

import pytest

from policy_extender.wire import compact
from policy_extender.wire.decode import (decode_job, decode_predicate, decode_prioritize,
                                         decode_queue, decode_task_event, decode_victims)
from policy_extender.errors import CompactError
from policy_extender.wire.snapshot import decode_session_open
from policy_extender.wire.session_views import SnapshotEnv

from tests.support.bodies import sample


def wire(body) -> bytes:
    return json.dumps(body).encode()


def keys_of(verb: str, *path) -> list:
    value = json.loads(sample(verb))
    for key in path:
        value = value[key] if not isinstance(value, dict) or key in value else next(iter(value.values()))
    return list(value)


@pytest.mark.parametrize("built,verb,path", [
    (lambda: compact.task({"name": "t"}), "predicate", ("task",)),
    (lambda: compact.node({"name": "n"}), "predicate", ("node",)),
    (lambda: compact.job({"name": "j"}), "jobReady", ("job",)),
    (lambda: compact.queue({"name": "q"}), "queueOverused", ("queue",)),
    (lambda: compact.session_body([], [], []), "onSessionOpen", ()),
])
def test_objects_have_every_key_volcano_sends_in_its_order(built, verb, path):
    assert list(built()) == keys_of(verb, *path)


def test_resources_are_milli_units_on_the_wire():
    t = compact.task({"name": "t", "requests": {"cpu": "500m", "memory": "4Gi", "gpu": 2, "nvidia.com/gpumem": 80}})
    assert t["Resreq"] == {"MilliCPU": 500, "Memory": 4 * 2**30, "MaxTaskNum": 0,
                           "ScalarResources": {"pods": 1, "nvidia.com/gpu": 2000, "nvidia.com/gpumem": 80000}}
    assert t["Pod"]["spec"]["containers"][0]["resources"]["requests"] == {
        "cpu": "500m", "memory": str(4 * 2**30), "nvidia.com/gpu": "2", "nvidia.com/gpumem": "80"}
    assert compact.node({"name": "n"})["Releasing"]["ScalarResources"] is None   # Go: nil map


def test_predicate_round_trip(full):
    body = compact.predicate_body(
        {"name": "t", "namespace": "ml", "annotations": {"zone": "a"}, "labels": {"n": 3},
         "requests": {"cpu": 2, "memory": "4Gi", "gpu": 2}, "priority": 7, "priority_class": "hi",
         "node_selector": {"pool": "gpu"}, "tolerations": [{"key": "gpu", "effect": "NoSchedule"}],
         "job": "ml/j", "preemptable": True},
        {"name": "n1", "labels": {"zone": "a"}, "allocatable": {"gpu": 8, "cpu": 64, "memory": "512Gi"},
         "taints": [{"key": "gpu", "value": "yes"}], "unschedulable": True,
         "tasks": [{"name": "o", "requests": {"gpu": 1, "cpu": "500m"}}]})
    request = decode_predicate(wire(body), full)
    task, node = request.task, request.node
    assert (task.name, task.namespace, task.status, task.priority, task.priority_class) == ("t", "ml", "Pending", 7, "hi")
    assert task.requests.gpu == 2 and task.requests.memory == 4 * 2**30 and task.requests.cpu == 2
    assert task.annotations == {"zone": "a"} and task.labels == {"n": "3"} and task.node_selector == {"pool": "gpu"}
    assert [(t.key, t.operator, t.effect) for t in task.tolerations] == [("gpu", "Exists", "NoSchedule")]
    assert task.job_id == "ml/j" and task.preemptable and not task.best_effort
    assert node.labels["zone"] == "a" and node.unschedulable and node.ready
    assert [(t.key, t.value, t.effect) for t in node.taints] == [("gpu", "yes", "NoSchedule")]
    assert node.used.gpu == 1 and node.idle.gpu == 7 and node.idle.cpu == 63.5 and node.idle.pods == 109
    assert node.capacity.memory == 512 * 2**30 and node.allocatable.pods == 110
    assert [(t.name, t.status, t.node_name) for t in node.tasks] == [("o", "Running", "n1")]


def test_explicit_idle_and_not_ready(full):
    node = decode_predicate(wire(compact.predicate_body({}, {"name": "n", "idle": {"gpu": 3}, "ready": False})), full).node
    assert node.idle.gpu == 3 and node.ready is False and node.conditions["Ready"] == "False"


def test_prioritize_and_victims_round_trip(full):
    nodes = decode_prioritize(wire(compact.prioritize_body({}, [{"name": "a"}, {"name": "b"}])), full).nodes
    assert [n.name for n in nodes] == ["a", "b"]
    request = decode_victims(wire(compact.victims_body({"name": "e"}, [{"name": "v1", "priority": 1}, {"name": "v2"}])), full)
    assert [(v.name, v.status, v.priority) for v in request.evictees] == [("v1", "Running", 1), ("v2", "Running", 0)]


def test_job_and_queue_round_trip(full):
    body = compact.job_body({"name": "j", "namespace": "ml", "queue": "research", "min_available": 2,
                             "min_resources": {"gpu": 4, "cpu": "1500m"}, "phase": "Pending",
                             "tasks": [{"name": "w0", "status": "Running", "requests": {"gpu": 2}},
                                       {"name": "w1"}]})
    job = decode_job(wire(body), full).job
    assert (job.uid, job.queue_name, job.min_available, job.phase) == ("ml/j", "research", 2, "Pending")
    assert job.min_resources.gpu == 4 and job.min_resources.cpu == 1.5
    assert job.ready_tasks == 1 and job.pending_tasks == 1 and job.allocated.gpu == 2
    assert job.total_request.gpu == 2 and all(t.job_id == "ml/j" for t in job.tasks)
    queue = decode_queue(wire(compact.queue_body({"name": "research", "weight": 2, "capability": {"gpu": 8},
                                                  "reclaimable": False, "guarantee": {"cpu": 4}})), full).queue
    assert (queue.name, queue.uid, queue.weight, queue.reclaimable) == ("research", "research", 2, False)
    assert queue.capability.gpu == 8 and queue.guarantee.cpu == 4 and queue.state == "Open"


def test_session_round_trip_resolves_task_job_and_queue(full):
    body = compact.session_body([{"uid": "ml/job-1", "name": "job-1", "queue": "research", "min_available": 2}],
                                [{"name": "research", "weight": 2, "capability": {"gpu": 8}}], [{"name": "n1"}])
    loaded = decode_session_open(wire(body), full)
    alloc = compact.allocate_body({"name": "other-0", "job": "ml/job-1", "node_name": "n1", "requests": {"gpu": 2}})
    env = SnapshotEnv(loaded.jobs, loaded.queues)
    task = decode_task_event(wire(alloc), full, env).task
    assert task.status == "Allocated" and task.node_name == "n1"
    assert task.job.min_available == 2 and task.queue.capability.gpu == 8


@pytest.mark.parametrize("call,path,words", [
    (lambda: compact.predicate_body({}, {"labels": {}}), "node", "has no `name:`"),
    (lambda: compact.predicate_body({"colour": "red"}, {"name": "n"}), "task.colour", "unknown key 'colour'"),
    (lambda: compact.predicate_body({}, {"name": "n", "tasks": [{"name": "a"}, {"name": "b", "requests": {"gpu": "lots"}}]}),
     "node.tasks[1].requests.gpu", "not a Kubernetes quantity"),
    (lambda: compact.predicate_body({"requests": {"gpu": True}}, {"name": "n"}), "task.requests.gpu", "quantity"),
    (lambda: compact.predicate_body({"status": "Sleeping"}, {"name": "n"}), "task.status", "unknown task status"),
    (lambda: compact.predicate_body({"priority": "high"}, {"name": "n"}), "task.priority", "whole number"),
    (lambda: compact.predicate_body({"preemptable": "yes"}, {"name": "n"}), "task.preemptable", "true or false"),
    (lambda: compact.predicate_body({"labels": {"a": [1]}}, {"name": "n"}), "task.labels.a", "string value"),
    (lambda: compact.predicate_body("t", {"name": "n"}), "task", "expected a mapping"),
    (lambda: compact.prioritize_body({}, {"name": "n"}), "nodes", "expected a list"),
    (lambda: compact.prioritize_body({}, [{"name": "a"}, {}]), "nodes[1]", "has no `name:`"),
    (lambda: compact.victims_body({}, [{}]), "evictees[0]", "has no `name:`"),
    (lambda: compact.job_body({}), "job", "no `name:` or `uid:`"),
    (lambda: compact.queue_body({"name": "q", "weight": 1.5}), "queue.weight", "whole number"),
    (lambda: compact.session_body([{"name": "j", "tasks": [{"x": 1}]}], [], []), "jobs[0].tasks[0].x", "unknown key"),
    (lambda: compact.allocate_body({"requests": {"cpu": "2 cores"}}), "requests.cpu", "quantity"),
    (lambda: compact.predicate_body({}, {"name": "n", "allocatable": {"gpu": {"count": 8}}}), "node.allocatable.gpu",
     "expected a number or a quantity string, got a mapping"),
    (lambda: compact.allocate_body({"requests": {"gpu": [2]}}), "requests.gpu", "got a list"),
    (lambda: compact.predicate_body({}, {"name": "n", "taints": [{"effect": "NoSchedule"}]}), "node.taints[0]", "needs a `key:`"),
])
def test_bad_compact_input_says_where_and_what(call, path, words):
    with pytest.raises(CompactError) as error:
        call()
    assert error.value.path == path and words in error.value.message
