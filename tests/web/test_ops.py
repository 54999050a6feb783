"""Ops routes: /healthz, /readyz, /status, /metrics; not counted as verbs."""

from __future__ import annotations

import os
import time

from tests.support.app import post
from tests.support.bodies import sample_json


def test_healthz_and_readyz_with_a_good_policy_set(client):
    assert client.get("/healthz").get_json() == {"status": "ok"}
    ready = client.get("/readyz")
    assert ready.status_code == 200 and ready.get_json()["status"] == "ready"


def test_readyz_is_503_with_the_errors_until_the_policies_load(make_app):
    app = make_app({"a.policy": "filter (((\n"})
    response = app.test_client().get("/readyz")
    assert response.status_code == 503
    assert response.get_json()["errors"][0].startswith("a.policy:1:")


def test_status_reports_policy_version_files_and_session_head(app):
    client = app.test_client()
    status = client.get("/status").get_json()
    assert len(status["policy_version"]) == 16 and status["loaded_at"] > 0
    assert [os.path.basename(f) for f in status["files"]] == ["gang.policy", "zone.policy"]
    assert status["session"] is None and status["pid"] == os.getpid()
    post(client, "onSessionOpen")
    post(client, "allocateFunc")
    session = client.get("/status").get_json()["session"]
    assert session["policy_version"] == status["policy_version"] and session["seq"] == 1


def test_request_finished_callbacks_see_verbs_only(app):
    seen = []
    app.extensions["policy_extender"].on_request_finished(seen.append)
    client = app.test_client()
    client.get("/healthz")
    post(client, "predicate")
    post(client, "predicate", b"[")
    assert [(r.verb, r.status) for r in seen] == [("predicate", 200), ("predicate", 400)]
    assert seen[0].body_bytes == len(post.__globals__["sample"]("predicate")) and seen[0].seconds > 0


def test_metrics_count_verb_calls(client):
    post(client, "predicate")
    text = client.get("/metrics").get_data(as_text=True)
    assert 'policy_extender_requests_total{code="200",protocol="volcano",verb="predicate"}' in text


def _sessions_total(client) -> dict[str, float]:
    from prometheus_client.parser import text_string_to_metric_families
    text = client.get("/metrics").get_data(as_text=True)
    return {s.labels["event"]: s.value for family in text_string_to_metric_families(text)
            for s in family.samples if s.name == "policy_extender_sessions_total"}


def test_sessions_that_never_closed_are_counted_as_replaced_or_expired(make_app):
    client = make_app(session_ttl=0.2).test_client()
    before = _sessions_total(client)
    post(client, "onSessionOpen")
    post(client, "onSessionOpen")  # the first never closed: replaced
    time.sleep(0.3)                # the second outlives its TTL: expired, noticed at the close
    post(client, "onSessionClose")
    after = _sessions_total(client)
    events = ("opened", "closed", "expired", "replaced")
    delta = {event: after.get(event, 0) - before.get(event, 0) for event in events}
    assert delta == {"opened": 2, "closed": 0, "expired": 1, "replaced": 1}


def test_why_refuses_a_malformed_query_and_says_how(client):
    for query, message in (("", "ask about exactly one object"), ("?task=x", "expected NAMESPACE/NAME"),
                           ("?task=a/b&job=a/b", "ask about exactly one object")):
        answer = client.get("/why" + query)
        assert answer.status_code == 400
        assert message in answer.json["error"]


def test_why_with_the_tally_off_says_how_to_turn_it_on(make_app):
    answer = make_app(tally=False).test_client().get("/why?queue=default")
    assert answer.status_code == 404
    assert "set tally to true" in answer.json["error"]


def test_why_in_process_counts_a_rejection_and_an_audit(make_app):
    policies = {"a.policy": 'filter zone: node.labels["topology.kubernetes.io/zone"] != "zone-a"\n'
                            '    reason "zone-a is reserved"\n'
                            'filter zone-next: node.name != "node-0000"\n    audit\n'}
    client = make_app(policies=policies).test_client()
    assert post(client, "onSessionOpen").status_code == 200
    body = sample_json("predicate")
    answer = post(client, "predicate", body).json
    task = f"{body['task']['Namespace']}/{body['task']['Name']}"
    (cycle,) = client.get("/why?task=" + task).json["cycles"]
    assert cycle["open"] is True
    fit = answer["code"] == 0
    assert cycle["predicate"]["answers"] == 1 and cycle["predicate"]["fit"] == int(fit)
    assert cycle["audit"]["zone-next"]["outcomes"] == {"reject": 1}


def test_why_shows_prioritize_and_victims_of_a_task(make_app):
    client = make_app().test_client()
    assert post(client, "onSessionOpen").status_code == 200
    assert post(client, "prioritize").status_code == 200
    assert post(client, "preemptable").status_code == 200
    body = sample_json("prioritize")
    task = f"{body['task']['Namespace']}/{body['task']['Name']}"
    (cycle,) = client.get("/why?task=" + task).json["cycles"]
    top = cycle["prioritize"]["top_nodes"]
    assert cycle["prioritize"]["calls"] == 1 and 1 <= len(top) <= 5
    assert [n["score"] for n in top] == sorted((n["score"] for n in top), reverse=True)
    assert all(sum(n["rules"].values()) == n["score"] for n in top)
    evictor = sample_json("preemptable")["evictor"]
    (cycle,) = client.get(f"/why?task={evictor['Namespace']}/{evictor['Name']}").json["cycles"]
    assert cycle["victims"]["preemptable"]["calls_as_evictor"] == 1
