"""Verbs on bodies built from compact specs (``wire.compact``): small, exact cases."""

from __future__ import annotations

import pytest

from policy_extender.wire import compact
from tests.web import goresponses
from tests.support.app import post

POLICIES = {"p.policy": """\
filter zone: node.labels["zone"] == task.annotations["zone"]
  reason "wrong zone"
  unresolvable
filter gpu: free_gpu >= task_gpu
  reason "not enough GPUs"
score gpu-free: free_gpu
enqueue small: job.min_available <= 2
  permit
enqueue gang-cap: job.min_available <= 4
overused cap: queue.allocated.gpu >= queue.capability.gpu
victim cheap: evictee.priority < 10
"""}

TASK = {"name": "t0", "annotations": {"zone": "a"}, "requests": {"gpu": 2}}


@pytest.fixture
def client(make_app):
    return make_app(POLICIES).test_client()


def decide(client, verb, body):
    response = post(client, verb, body)
    assert response.status_code == 200, response.data
    return goresponses.decode(verb, response.data)


@pytest.mark.parametrize("node, fits, code", [
    ({"name": "n1", "labels": {"zone": "a"}, "idle": {"gpu": 2}}, True, 0),
    ({"name": "n2", "labels": {"zone": "b"}, "idle": {"gpu": 8}}, False, 3),
    ({"name": "n3", "labels": {"zone": "a"}, "idle": {"gpu": 1}}, False, 2),
])
def test_predicate(client, node, fits, code):
    response = decide(client, "predicate", compact.predicate_body(TASK, node))
    assert (response.status == "", response.code) == (fits, code)


def test_prioritize_scores_whole_gpus_not_milli(client):
    nodes = [{"name": "n1", "idle": {"gpu": 3}}, {"name": "n2", "idle": {"gpu": 0}}]
    assert decide(client, "prioritize", compact.prioritize_body(TASK, nodes)).nodeScore == {"n1": 3.0, "n2": 0.0}


@pytest.mark.parametrize("min_available, status", [(2, 1), (3, 0), (5, -1)])
def test_enqueue_permit_modifier(client, min_available, status):
    body = compact.job_body({"name": "j", "queue": "q", "min_available": min_available})
    assert decide(client, "jobEnqueueable", body).status == status


@pytest.mark.parametrize("allocated, overused", [({"gpu": 8}, True), ({"gpu": 7}, False)])
def test_queue_overused_on_quantities(client, allocated, overused):
    body = compact.queue_body({"name": "q", "capability": {"gpu": 8}, "allocated": allocated})
    assert decide(client, "queueOverused", body).overused is overused


@pytest.mark.parametrize("allocated, overused", [
    ("1e400", True), ("99999999999999999999999999", True), ("1e999999999", True), ("-1e400", False),
    ("1e-999999999", False), ("9" * 5000 + "Ki", True)])
def test_queue_overused_on_quantities_past_the_kubernetes_cap(client, allocated, overused):
    """A quantity past what Kubernetes keeps (2**63 - 1) is capped as Kubernetes caps it: an answer,
    not a 500 (``OverflowError``, ``int()``'s 4,300-digit limit); an exponent is never expanded
    (``tests/wire/test_resources.py`` guards that in a child process)."""
    body = compact.queue_body({"name": "q", "capability": {"gpu": 8}, "allocated": {"gpu": 0}})
    body["queue"]["Queue"]["status"]["allocated"] = {"nvidia.com/gpu": allocated}
    assert decide(client, "queueOverused", body).overused is overused


def test_victims_echo_the_chosen_evictees(client):
    body = compact.victims_body({"name": "e", "priority": 100},
                                [{"name": "cheap", "priority": 1}, {"name": "dear", "priority": 50}])
    response = decide(client, "preemptable", body)
    assert [v["Name"] for v in response.victims] == ["cheap"]
    assert response.victims[0] == body["evictees"][0]


@pytest.mark.parametrize("verb", ["allocateFunc", "deallocateFunc"])
def test_an_event_with_amounts_past_int64_is_recorded(make_app, verb):
    """Volcano's amounts are float64 milli units; in whole units an integral one can be past
    2**64 (1e308 milli GPUs), which the record once kept as an int msgpack cannot hold: a 500.
    Now recorded as the floats the record declares, and read back the same."""
    from policy_extender.session import decode_allocation
    app = make_app(POLICIES)
    client = app.test_client()
    decide(client, "onSessionOpen", compact.session_body(
        [{"name": "j", "queue": "q", "tasks": [TASK]}], [{"name": "q"}], [{"name": "n1"}]))
    body = compact.allocate_body({**TASK, "job": "j", "node": "n1"})
    body["task"]["Resreq"]["ScalarResources"] = {"nvidia.com/gpu": 1e308, "pods": -1180591620717411303424}
    assert decide(client, verb, body).errorMessage == ""
    sessions = app.extensions["policy_extender"].sessions
    [(net, record)] = sessions.allocations(sessions.head().session_id)
    resources = decode_allocation(record).resources
    assert net == (1 if verb == "allocateFunc" else -1)
    assert resources["nvidia.com/gpu"] == 1e305 and resources["pods"] == -1180591620717411303424.0
