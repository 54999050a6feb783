"""``/status`` says which rules Volcano has not called in the last cycles (issue 47 item 2), and
the values file of the set is served with the directory (``values_file``, issue 47 item 1)."""

from __future__ import annotations

import json

from policy_extender.wire import compact

from tests.support.app import post

POLICIES = {"a.policy": "score most-idle: node.idle.gpu\nready gang-ready: job.ready_tasks >= job.min_available\n"}
OPEN = compact.session_body([], [], [{"name": "n1", "allocatable": {"gpu": 8}}])
PRIORITIZE = compact.prioritize_body({"name": "t0", "requests": {"gpu": 1}}, [{"name": "n1", "allocatable": {"gpu": 8}}])


def test_status_lists_the_ready_rule_volcano_never_called(make_app):
    client = make_app(POLICIES, rules_not_called_cycles=2).test_client()
    assert client.get("/status").get_json()["rules_not_called"] is None
    for _ in range(3):
        assert post(client, "onSessionOpen", OPEN).status_code == 200
        assert post(client, "prioritize", PRIORITIZE).status_code == 200
        assert post(client, "onSessionClose", b"{}").status_code == 200
    assert post(client, "onSessionOpen", OPEN).status_code == 200  # the open cycle is left out
    client.application.extensions["policy_extender"].unserved.thread.join(10)  # the gauge is set beside the answer
    report = client.get("/status").get_json()["rules_not_called"]
    assert report == {"cycles": 2, "rules": [{"rule": "gang-ready", "kind": "ready", "verb": "jobReady",
                                             "where": "a.policy:2:1"}]}
    assert 'policy_extender_rules_not_called{verb="jobReady"} 1.0' in client.get("/metrics").get_data(as_text=True)


def test_status_files_hold_the_values_file(make_app, tmp_path):
    values = tmp_path / "prod-values.yaml"
    values.write_text("a.cap: 3\n")
    app = make_app({"a.policy": "param cap: number = 1\nfilter f: task.requests.gpu <= cap\n"}, values_file=str(values))
    status = app.test_client().get("/status").get_json()
    assert status["files"] == ["a.policy", "prod-values.yaml"]
    answer = post(app.test_client(), "predicate", compact.predicate_body({"name": "t", "requests": {"gpu": 3}},
                                                                          {"name": "n", "allocatable": {"gpu": 8}}))
    assert json.loads(answer.data)["status"] == ""  # 3 <= cap 3: fits with prod's value
