"""The deadline of a Volcano verb call, from ``volcano_timeout`` (web/dispatch.py → lang/budget.py):
a call still evaluating when Volcano has stopped waiting answers 500 (E513), so ``extender.ignorable``
decides, instead of computing an answer nobody reads (issue 44 item 4)."""

from __future__ import annotations

import json

from policy_extender.wire import compact
from tests.support.app import post

POLICY = {"cost.policy": "score linear: count(m for m in cluster.nodes if m.ready)\n"}


def nodes(count: int) -> list[dict]:
    return [{"name": f"n{i:03d}"} for i in range(count)]


def prioritize_after_open(client, node_count: int = 50):
    opened = post(client, "onSessionOpen", compact.session_body([], [], nodes(node_count)))
    assert opened.status_code == 200
    return post(client, "prioritize", compact.prioritize_body({"name": "t"}, nodes(node_count)))


def test_a_call_past_volcano_timeout_answers_500_with_e513(make_app):
    client = make_app(POLICY, volcano_timeout=1e-9).test_client()  # every call is already late at its first charge
    answer = prioritize_after_open(client)
    assert answer.status_code == 500
    error = json.loads(answer.data)["error"]
    assert "E513" in error and "(rule linear)" in error and "volcano_timeout" in error


def test_the_same_call_within_volcano_timeout_answers(make_app):
    client = make_app(POLICY, volcano_timeout=3600.0).test_client()
    answer = prioritize_after_open(client)
    assert answer.status_code == 200
    assert set(json.loads(answer.data)["nodeScore"].values()) == {50.0}


def test_volcano_timeout_0_sets_no_deadline(make_app):
    client = make_app(POLICY, volcano_timeout=0.0).test_client()
    assert prioritize_after_open(client).status_code == 200
