"""Bad input: every refusal is a JSON ``{"error": ...}`` with the right status, and the worker
and the session are unharmed."""

from __future__ import annotations

import io
import json

import pytest

from tests.web import goresponses
from tests.support.app import post
from tests.support.bodies import sample, sample_json


def error_of(response, status: int) -> str:
    assert response.status_code == status, response.data
    assert response.content_type == "application/json"
    return goresponses.decode_error(response.data).error


@pytest.mark.parametrize("verb, body, where", [
    ("predicate", b'{"task": {', "malformed JSON"),
    ("predicate", b"[1, 2]", "$"),
    ("predicate", b'"text"', "$"),
    ("predicate", json.dumps({"node": sample_json("predicate")["node"]}).encode(), "$.task"),
    ("predicate", json.dumps({"task": sample_json("predicate")["task"], "node": None}).encode(), "$.node"),
    ("prioritize", b'{"nodes": []}', "$.task"),
    ("jobEnqueueable", b'{"job": null}', "$.job"),
    ("jobReady", b"{}", "$.job"),
    ("queueOverused", b"{}", "$.queue"),
    ("allocateFunc", b'{"task": 5}', "$.task"),
    ("preemptable", b'{"evictees": []}', "$.evictor"),
])
def test_unreadable_bodies_are_400_saying_where(client, verb, body, where):
    assert where in error_of(post(client, verb, body), 400)


def test_a_wrong_type_in_a_field_the_policies_read_is_400_with_its_path(client):
    body = sample_json("predicate")
    body["node"]["Node"]["metadata"]["labels"] = 42
    assert "$.node.Node.metadata.labels" in error_of(post(client, "predicate", body), 400)


def test_a_wrong_type_in_a_field_nobody_reads_is_ignored(client):
    body = sample_json("predicate")
    body["task"]["Pod"]["spec"]["containers"] = "not a list"
    assert post(client, "predicate", body).status_code == 200


def test_unknown_path_is_a_json_404(client):
    assert "404" in error_of(client.post("/filter", data=b"{}"), 404)
    assert "404" in error_of(client.get("/nothing"), 404)


@pytest.mark.parametrize("method", ["GET", "PUT", "DELETE"])
def test_wrong_method_on_a_verb_is_a_json_405_with_allow(client, method):
    response = client.open("/predicate", method=method)
    assert "POST" in error_of(response, 405)
    assert response.headers["Allow"] == "POST"


def test_wrong_method_on_an_ops_route_is_a_json_405(client):
    error_of(client.post("/healthz"), 405)


def test_a_body_over_the_verbs_limit_is_413_before_it_is_read(make_app):
    client = make_app(body_limits={"predicate": 1024}).test_client()
    message = error_of(post(client, "predicate"), 413)
    assert "1024" in message and "body_limits" in message
    assert post(client, "prioritize").status_code == 200  # other verbs keep the default


def test_a_chunked_body_over_the_limit_is_413(make_app):
    client = make_app(body_limit=1024).test_client()
    response = client.post("/predicate", input_stream=io.BytesIO(sample("predicate")),
                           content_type="application/json", headers={"Transfer-Encoding": "chunked"},
                           environ_overrides={"CONTENT_LENGTH": "", "wsgi.input_terminated": True})
    assert "more than 1024" in error_of(response, 413)


def test_a_wrong_content_type_is_415_and_a_missing_one_is_accepted(client):
    assert "application/json" in error_of(post(client, "predicate", content_type="text/plain"), 415)
    response = client.post("/predicate", data=sample("predicate"), content_type=None)
    assert response.status_code == 200
    assert post(client, "predicate", content_type="application/json; charset=utf-8").status_code == 200


def test_bad_calls_leave_the_session_as_it_was(app):
    client = app.test_client()
    sessions = app.extensions["policy_extender"].sessions
    post(client, "onSessionOpen")
    post(client, "allocateFunc")
    before = sessions.head()
    post(client, "allocateFunc", b'{"task": ')
    post(client, "deallocateFunc", b"{}")
    post(client, "onSessionOpen", b"[")
    assert sessions.head() == before
    assert post(client, "predicate").status_code == 200  # the worker keeps serving


def test_a_bad_snapshot_does_not_replace_the_open_session(app):
    client = app.test_client()
    sessions = app.extensions["policy_extender"].sessions
    post(client, "onSessionOpen")
    before = sessions.head()
    error_of(post(client, "onSessionOpen", b'{"Jobs": 7}'), 400)
    assert sessions.head() == before


def test_no_policy_set_loaded_is_503_everywhere_and_not_ready(make_app):
    client = make_app({"broken.policy": "filter (((\n"}).test_client()
    assert client.get("/readyz").status_code == 503
    assert "no policy set" in error_of(post(client, "predicate"), 503)


def test_an_evaluation_error_is_a_500_never_a_silent_fit(make_app):
    overflow = {"big.policy": "filter huge: node.idle.memory * node.idle.memory * node.idle.memory > 0\n"}
    client = make_app(overflow).test_client()
    message = error_of(post(client, "predicate"), 500)
    assert "predicate failed" in message and "E510" in message
    assert post(client, "jobReady").status_code == 200  # the worker keeps serving


@pytest.mark.parametrize("verb", ["predicate", "prioritize", "onSessionOpen", "jobEnqueueable", "preemptable",
                                  "allocateFunc"])
def test_invalid_utf8_in_a_string_the_policies_read_is_400_at_its_byte(client, verb):
    """msgspec raises ``UnicodeDecodeError`` (no position) for a string it decodes: the answer is
    a 400 that says at which byte, not a 500, and the good call after it is answered as before."""
    body = sample(verb)
    at = body.find(b'"Name":"') + len(b'"Name":"')
    bad = body[:at] + b"\xff" + body[at:]
    before = post(client, verb, body)
    assert f"invalid UTF-8 at byte {at}" in error_of(post(client, verb, bad), 400)
    after = post(client, verb, body)
    assert (after.status_code, after.data) == (before.status_code, before.data)
