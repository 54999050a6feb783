"""kube-scheduler's routes in the WSGI app (``app.test_client()``: the production dispatch): where
``kube_scheduler_prefix`` and ``kube_scheduler_verbs`` put them, an empty prefix serving none, the
body limit, a policy set without kube-scheduler rules, and what the tally's ``/why`` shows."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from policy_extender.decide.tallying import window_head
from policy_extender.wire import compact

BODIES = Path(__file__).resolve().parents[1] / "wire" / "kube"

KUBE = {"kube.policy": """\
protocol kube-scheduler
filter zone: node.labels["zone"] != "c"
  reason "zone c is drained"
score cores: node.allocatable.cpu
"""}
TASK = {"name": "p", "namespace": "ml"}
NODES = [{"name": "a", "labels": {"zone": "a"}, "allocatable": {"cpu": 3}},
         {"name": "c", "labels": {"zone": "c"}, "allocatable": {"cpu": 30}}]


def post(client, path: str, body) -> tuple[int, dict]:
    answer = client.post(path, data=json.dumps(body) if not isinstance(body, bytes) else body,
                         content_type="application/json")
    return answer.status_code, answer.get_json()


def test_the_default_prefix_serves_the_three_verbs(make_app):
    client = make_app(KUBE).test_client()
    status, answer = post(client, "/kube-scheduler/filter", compact.extender_args_body(TASK, NODES))
    assert status == 200 and answer["FailedNodes"] == {"c": "zone (kube.policy:2): zone c is drained"}
    status, answer = post(client, "/kube-scheduler/prioritize", compact.extender_args_body(TASK, NODES))
    assert (status, answer) == (200, [{"Host": "a", "Score": 3}, {"Host": "c", "Score": 10}])
    status, answer = post(client, "/kube-scheduler/preempt", compact.preemption_args_body(TASK, [{"name": "v"}]))
    assert status == 200 and list(answer["NodeNameToMetaVictims"]) == ["node-1"]  # no victim rule: every victim


def test_the_prefix_and_the_verb_paths_are_configurable(make_app):
    client = make_app(KUBE, kube_scheduler_prefix="/ext/k8s/", kube_scheduler_verbs={"filter": "myFilter"}).test_client()
    assert post(client, "/ext/k8s/myFilter", compact.extender_args_body(TASK, NODES))[0] == 200
    assert post(client, "/ext/k8s/prioritize", compact.extender_args_body(TASK, NODES))[0] == 200
    assert client.post("/kube-scheduler/filter", data=b"{}", content_type="application/json").status_code == 404
    assert client.post("/ext/k8s/filter", data=b"{}", content_type="application/json").status_code == 404


def test_an_empty_prefix_serves_no_kube_scheduler_verb(make_app):
    client = make_app(KUBE, kube_scheduler_prefix="").test_client()
    for verb in ("filter", "prioritize", "preempt"):
        assert client.post(f"/kube-scheduler/{verb}", data=b"{}", content_type="application/json").status_code == 404
    assert post(client, "/prioritize", compact.prioritize_body(TASK, NODES))[0] == 200  # Volcano's still served


def test_a_body_over_the_kube_verbs_limit_is_413(make_app):
    client = make_app(KUBE, body_limits={"kube-scheduler.filter": 1000}).test_client()
    body = (BODIES / "filter.json").read_bytes()
    answer = client.post("/kube-scheduler/filter", data=body, content_type="application/json")
    assert answer.status_code == 413
    assert post(client, "/kube-scheduler/prioritize", body)[0] == 200  # its own limit (256 MiB)


def test_a_set_without_kube_scheduler_rules_keeps_every_node_and_scores_none(make_app):
    """Files without a protocol statement serve Volcano only: kube-scheduler's verbs then decide
    nothing (every node fits, every score 0, every victim kept)."""
    client = make_app({"v.policy": KUBE["kube.policy"].replace("protocol kube-scheduler\n", "")}).test_client()
    status, answer = post(client, "/kube-scheduler/filter", compact.extender_args_body(TASK, NODES))
    assert [i["metadata"]["name"] for i in answer["Nodes"]["items"]] == ["a", "c"] and answer["FailedNodes"] == {}
    assert post(client, "/kube-scheduler/prioritize", compact.extender_args_body(TASK, NODES))[1] == \
        [{"Host": "a", "Score": 0}, {"Host": "c", "Score": 0}]


def test_a_get_is_405_allowing_post(make_app):
    answer = make_app(KUBE).test_client().get("/kube-scheduler/filter")
    assert answer.status_code == 405 and answer.headers["Allow"] == "POST"


def test_why_shows_a_pods_kube_scheduler_calls_in_the_window_they_were_answered(make_app):
    client = make_app(KUBE).test_client()
    post(client, "/kube-scheduler/filter", compact.extender_args_body(TASK, NODES))
    post(client, "/kube-scheduler/prioritize", compact.extender_args_body(TASK, NODES))
    cycles = client.get("/why?task=ml/p").get_json()["cycles"]
    shown = {k: v for c in cycles for k, v in c.items() if k.startswith("kube-scheduler.")}
    assert shown["kube-scheduler.filter"] == {
        "answers": 2, "fit": 1, "rejected_by": {"zone": {"count": 1, "example": "zone (kube.policy:2): zone c is drained"}}}
    assert [n["node"] for n in shown["kube-scheduler.prioritize"]["top_nodes"]] == ["c", "a"]
    assert all(c["cycle"].startswith("kube-scheduler@") for c in cycles)


def test_window_heads_are_one_per_minute_and_named_by_their_start():
    head = window_head("kube-scheduler", 1795695030.5)
    assert (head.session_id, head.opened_at) == ("kube-scheduler@2026-11-26T12:10:00Z", 1795695000.0)
    assert window_head("kube-scheduler", 1795695059.9) is head
    assert window_head("kube-scheduler", 1795695060).session_id == "kube-scheduler@2026-11-26T12:11:00Z"


@pytest.mark.parametrize("path", ["/kube-scheduler/filter", "/kube-scheduler/prioritize", "/kube-scheduler/preempt"])
def test_no_policy_set_loaded_is_503_in_go_keys(make_app, tmp_path, path):
    broken = make_app({"bad.policy": "filter x: \n"})
    status, answer = post(broken.test_client(), path, (BODIES / "filter.json").read_bytes())
    assert status == 503 and "no policy set is loaded" in answer["Error"]
