"""Every verb through ``app.test_client()``: sample bodies in, Volcano's Go response types out.

Responses are decoded strictly into the Go-shaped structs of ``goresponses`` (an int answered
``2.0`` fails); expected decisions are worked out here from the sample bodies.
"""

from __future__ import annotations

import copy

import pytest

from tests.web import goresponses
from tests.support.app import post
from tests.support.bodies import sample, sample_json

ZONE = "topology.kubernetes.io/zone"


def answer(client, verb: str, body=None):
    response = post(client, verb, body)
    assert response.status_code == 200, response.data
    assert response.content_type == "application/json"
    return goresponses.decode(verb, response.data)


def predicate_on(zone: str) -> dict:
    body = sample_json("predicate")
    body["node"]["Node"]["metadata"]["labels"][ZONE] = zone
    return body


def test_predicate_fits_a_node_outside_zone_b(client):
    assert answer(client, "predicate") == goresponses.PredicateResponse(status="", code=0)


def test_predicate_rejects_zone_b_with_the_rules_reason_and_a_nonzero_code(client):
    response = answer(client, "predicate", predicate_on("zone-b"))
    assert response.status.endswith("zone-b is reserved") and response.code != 0


def test_prioritize_scores_every_node_by_its_idle_gpus(client):
    nodes = sample_json("prioritize")["nodes"]
    expected = {n["Name"]: 10 * n["Idle"]["ScalarResources"].get("nvidia.com/gpu", 0) / 1000 for n in nodes}
    response = answer(client, "prioritize")
    assert response.nodeScore == expected and response.errorMessage == ""


@pytest.mark.parametrize("verb", ["preemptable", "reclaimable"])
def test_victims_are_the_evictees_sent_whole(client, verb):
    body = sample_json(verb)
    lower = [t for t in body["evictees"] if t["Priority"] < body["evictor"]["Priority"]]
    response = answer(client, verb)
    assert response.victims == lower and lower
    assert response.status == 1


def test_job_enqueueable_abstains_for_a_gang_of_three(client):
    assert sample_json("jobEnqueueable")["job"]["MinAvailable"] == 3
    assert answer(client, "jobEnqueueable").status == 0  # the rule holds: no objection


def test_job_enqueueable_rejects_a_gang_of_four(client):
    body = sample_json("jobEnqueueable")
    body["job"]["MinAvailable"] = 4
    assert answer(client, "jobEnqueueable", body).status == -1


def test_queue_overused_only_for_the_restricted_queue(client):
    assert answer(client, "queueOverused").overused is False
    body = sample_json("queueOverused")
    body["queue"]["Name"] = "restricted"
    assert answer(client, "queueOverused", body).overused is True


def test_job_ready_when_enough_tasks_run(client):
    body = sample_json("jobReady")
    statuses = [t["Status"] for t in body["job"]["Tasks"].values()]
    ready = sum(s in (2, 8, 16, 32, 128) for s in statuses) >= body["job"]["MinAvailable"]
    assert answer(client, "jobReady").status is ready
    for task in body["job"]["Tasks"].values():
        task["Status"] = 32
    body["job"]["MinAvailable"] = len(statuses)
    assert answer(client, "jobReady", body).status is True


EVENTS = ("allocateFunc", "deallocateFunc")


@pytest.mark.parametrize("verb", EVENTS)
def test_events_are_accepted_in_a_session(client, verb):
    assert post(client, "onSessionOpen").status_code == 200
    assert answer(client, verb) == goresponses.EventResponse(errorMessage="")


@pytest.mark.parametrize("verb", EVENTS)
def test_an_event_with_no_open_session_is_an_error_not_dropped(client, verb):
    # Volcano sends events only inside a session: none open means the store lost it (or the
    # open failed), and the event cannot be counted; 503 lets extender.ignorable decide
    response = post(client, verb)
    assert response.status_code == 503
    assert b"no session is open" in response.data


@pytest.mark.parametrize("verb", ["onSessionOpen", "onSessionClose", "jobEnqueued"])
def test_verbs_whose_answer_volcano_ignores_answer_200(client, verb):
    assert post(client, verb).status_code == 200


NEUTRAL = {
    "predicate": goresponses.PredicateResponse(status="", code=0),
    "preemptable": goresponses.VictimsResponse(status=0, victims=[]),
    "reclaimable": goresponses.VictimsResponse(status=0, victims=[]),
    "jobEnqueueable": goresponses.JobEnqueueableResponse(status=0),
    "queueOverused": goresponses.QueueOverusedResponse(overused=False),
    "jobReady": goresponses.JobReadyResponse(status=True),
    "allocateFunc": goresponses.EventResponse(errorMessage=""),
    "deallocateFunc": goresponses.EventResponse(errorMessage=""),
}


@pytest.mark.parametrize("verb", sorted(NEUTRAL))
def test_a_verb_without_rules_answers_its_neutral_value(make_app, verb):
    client = make_app({"empty.policy": "# no rules yet\n"}).test_client()
    if verb in EVENTS:
        post(client, "onSessionOpen")
    assert answer(client, verb) == NEUTRAL[verb]


def test_prioritize_without_rules_scores_nothing_or_zero(make_app):
    client = make_app({"empty.policy": "# no rules yet\n"}).test_client()
    assert set(answer(client, "prioritize").nodeScore.values()) <= {0.0}


def test_renamed_verbs_are_served_on_their_paths_only(make_app):
    client = make_app(verbs={"predicate": "customFilter"}, path_prefix="/ext").test_client()
    response = client.post("/ext/customFilter", data=sample("predicate"), content_type="application/json")
    assert goresponses.decode("predicate", response.data).code == 0
    assert client.post("/predicate", data=sample("predicate")).status_code == 404
    assert client.post("/ext/prioritize", data=sample("prioritize")).status_code == 200


def test_decisions_that_need_the_snapshot_follow_the_session(make_app):
    policies = {"gang.policy": 'filter small-gang: (task.job.min_available ?? 0) < 3\n  reason "gang too big"\n'}
    client = make_app(policies).test_client()
    assert answer(client, "predicate").code == 0  # no session: task.job is null
    assert post(client, "onSessionOpen").status_code == 200
    assert answer(client, "predicate").status.endswith("gang too big")  # job-002 has MinAvailable 3
    assert post(client, "onSessionClose").status_code == 200
    assert answer(client, "predicate").code == 0


def test_counters_follow_allocate_and_deallocate_events(make_app):
    policies = {"cap.policy": 'filter gpu-cap: session.queue.gpu + task.requests.gpu <= 2\n  reason "queue GPU cap"\n'}
    client = make_app(policies).test_client()
    post(client, "onSessionOpen")
    assert answer(client, "predicate").code == 0  # 0 + 2 GPUs
    allocated = sample_json("allocateFunc")  # job-002's worker-0 with 2 GPUs, queue restricted
    assert answer(client, "allocateFunc", allocated).errorMessage == ""
    assert answer(client, "predicate").status.endswith("queue GPU cap")  # 2 + 2 > 2
    answer(client, "allocateFunc", allocated)  # a retry is not counted twice
    released = copy.deepcopy(allocated)
    assert answer(client, "deallocateFunc", released).errorMessage == ""
    assert answer(client, "predicate").code == 0


def test_a_session_keeps_its_policy_version_until_the_next_open(make_app, tmp_path):
    app = make_app({"zone.policy": 'filter z: node.name != "node-0000"\n'})
    client = app.test_client()
    service = app.extensions["policy_extender"]
    first = service.policy_status.version
    post(client, "onSessionOpen")
    policy_file = tmp_path / "policies0" / "zone.policy"
    policy_file.write_text('filter z: node.name == "node-0000"\n')
    service.reloader.reload_now()
    assert service.policy_status.version != first
    assert answer(client, "predicate").code != 0  # still the pinned first version
    post(client, "onSessionOpen")
    assert answer(client, "predicate").code == 0  # the new cycle pins the new version
    post(client, "onSessionClose")
    assert answer(client, "predicate").code == 0  # no session: the current version


def test_a_worker_compiles_a_pinned_version_it_never_loaded(make_app, tmp_path):
    store = f"sqlite:{tmp_path / 'shared.sqlite3'}"
    opener = make_app({"a.policy": 'filter z: node.name != "node-0000"\n'}, session_store=store)
    other = make_app({"a.policy": "# this worker has another version\n"}, session_store=store)
    post(opener.test_client(), "onSessionOpen")
    assert answer(other.test_client(), "predicate").code != 0
