"""Calls without a session, or whose job the snapshot lacks: counted, logged once per cycle,
shown in /status, and with ``require_session`` answered 500 when the rules read session data."""

from __future__ import annotations

import json
import logging

import pytest

from policy_extender.policyset import compile_sources
from policy_extender.decide.session_gaps import SessionGaps

from tests.support.app import post
from tests.support.bodies import sample, sample_json

#: a filter that reads the snapshot (task.job), a score that does not
SNAPSHOT_POLICIES = {
    "gang.policy": """\
filter gang-size: task.job.min_available <= 8
  reason "job too large"
score gpu: 10 * free_gpu
""",
}


def metric(client, name: str, verb: str) -> float:
    text = client.get("/metrics").get_data(as_text=True)
    prefix = f'policy_extender_{name}_total{{verb="{verb}"}} '
    return sum(float(line.split()[-1]) for line in text.splitlines() if line.startswith(prefix))


def predicate_with_job(job_uid: str) -> bytes:
    body = sample_json("predicate")
    body["task"]["Job"] = job_uid
    return json.dumps(body).encode()


def gap_warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.name == "policy_extender.sessions" and r.levelno == logging.WARNING]


def test_calls_without_a_session_are_counted_logged_once_and_shown_in_status(make_app, caplog):
    client = make_app(SNAPSHOT_POLICIES).test_client()
    caplog.set_level(logging.WARNING, "policy_extender.sessions")
    before = {verb: metric(client, "calls_without_session", verb) for verb in ("predicate", "prioritize")}
    for _ in range(5):
        assert post(client, "predicate").status_code == 200
    assert post(client, "prioritize").status_code == 200
    assert metric(client, "calls_without_session", "predicate") - before["predicate"] == 5
    assert metric(client, "calls_without_session", "prioritize") - before["prioritize"] == 1
    warnings = gap_warnings(caplog)
    assert len(warnings) == 1, warnings  # one per cycle and gap, whatever the verbs
    assert "raise extender.httpTimeout" in warnings[0] and "onSessionOpenVerb" in warnings[0]
    gaps = client.get("/status").get_json()["session_gaps"]["cycles"]
    assert gaps[0]["cycle"] == "no session after none"
    assert gaps[0]["no_session"] == {"predicate": 5, "prioritize": 1}
    assert gaps[0]["advice"]


def test_no_warning_and_no_count_once_the_session_is_open(make_app, caplog):
    client = make_app(SNAPSHOT_POLICIES).test_client()
    caplog.set_level(logging.WARNING, "policy_extender.sessions")
    before = [metric(client, name, "predicate") for name in ("calls_without_session", "calls_job_not_in_session")]
    assert post(client, "onSessionOpen").status_code == 200
    assert post(client, "predicate").status_code == 200
    assert [metric(client, name, "predicate") for name in ("calls_without_session", "calls_job_not_in_session")] == before
    assert gap_warnings(caplog) == []
    assert client.get("/status").get_json()["session_gaps"]["cycles"] == []


def test_a_task_whose_job_is_not_in_the_snapshot_is_counted_per_cycle(make_app, caplog):
    client = make_app(SNAPSHOT_POLICIES).test_client()
    caplog.set_level(logging.WARNING, "policy_extender.sessions")
    before = metric(client, "calls_job_not_in_session", "predicate")
    post(client, "onSessionOpen")
    first = client.get("/status").get_json()["session"]["id"]
    for _ in range(3):
        assert post(client, "predicate", predicate_with_job("no-such-job")).status_code == 200
    post(client, "onSessionClose")
    post(client, "onSessionOpen")
    second = client.get("/status").get_json()["session"]["id"]
    assert post(client, "predicate", predicate_with_job("no-such-job")).status_code == 200
    assert metric(client, "calls_job_not_in_session", "predicate") - before == 4
    warnings = gap_warnings(caplog)
    assert len(warnings) == 2 and first in warnings[0] and second in warnings[1]
    assert "no-such-job" in warnings[0] and "not in the open session's snapshot" in warnings[0]
    cycles = client.get("/status").get_json()["session_gaps"]["cycles"]
    assert [c["cycle"] for c in cycles] == [f"session {second}", f"session {first}"]
    assert cycles[1]["job_not_in_snapshot"] == {"predicate": 3}
    assert cycles[1]["jobs_not_in_snapshot"] == ["no-such-job"]


def test_calls_after_a_close_belong_to_the_cycle_after_that_session(make_app):
    client = make_app(SNAPSHOT_POLICIES).test_client()
    post(client, "onSessionOpen")
    post(client, "predicate")
    session = client.get("/status").get_json()["session"]["id"]
    post(client, "onSessionClose")
    post(client, "jobReady")
    cycles = client.get("/status").get_json()["session_gaps"]["cycles"]
    assert cycles[0]["cycle"] == f"no session after {session}"
    assert cycles[0]["no_session"] == {"jobReady": 1}


def test_require_session_answers_500_only_for_verbs_whose_rules_read_session_data(make_app, caplog):
    client = make_app(SNAPSHOT_POLICIES, require_session=True).test_client()
    caplog.set_level(logging.DEBUG, "policy_extender")
    refused = post(client, "predicate")
    assert refused.status_code == 500
    error = refused.get_json()["error"]
    assert "no scheduling session is open" in error and "extender.ignorable decides" in error
    assert post(client, "prioritize").status_code == 200   # score rules read no session data
    assert post(client, "jobReady").status_code == 200     # no ready rules at all
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert errors == []  # one WARNING per cycle, not an ERROR per call
    assert len(gap_warnings(caplog)) == 1
    post(client, "onSessionOpen")
    assert post(client, "predicate").status_code == 200
    missing = post(client, "predicate", predicate_with_job("no-such-job"))
    assert missing.status_code == 500
    assert "no-such-job is not in the open session's snapshot" in missing.get_json()["error"]


def test_without_require_session_the_rules_decide_on_nulls(make_app):
    client = make_app(SNAPSHOT_POLICIES).test_client()
    answer = post(client, "predicate")
    assert answer.status_code == 200
    assert answer.get_json()["status"]  # task.job is null: min_available null <= 8 is not true


@pytest.mark.parametrize("source, verbs", [
    ('filter a: node.name == "x"', []),
    ("filter a: task.job.min_available > 1", ["predicate"]),
    ("filter a: job.min_available > 1", ["predicate"]),
    ("score a: session.node.tasks", ["prioritize"]),
    ("enqueue a: job.min_available > 1", []),
    ("enqueue a: queue.weight > 1", ["jobEnqueueable"]),
    ("ready a: session.job.tasks >= 1", ["jobReady"]),
    ("ready a: session.open", []),
    ("victim a: evictee.job.priority > 1", ["preemptable", "reclaimable"]),
    ("overused a: queue.weight > 1", []),
    ("overused a: session.queue.gpu > 4", ["queueOverused"]),
    ('let j = task.job.name\nfilter a: j == "y"', ["predicate"]),
])
def test_the_policy_set_knows_which_verbs_read_session_data(source, verbs):
    assert sorted(compile_sources({"a.policy": source}).session_verbs) == verbs


def test_a_gap_that_goes_on_is_logged_again_after_a_minute(caplog):
    now = [1000.0]
    gaps = SessionGaps(clock=lambda: now[0])
    caplog.set_level(logging.WARNING, "policy_extender.sessions")
    for _ in range(10):
        gaps.no_session("predicate")
    now[0] += 30
    gaps.no_session("predicate")
    assert len(gap_warnings(caplog)) == 1
    now[0] += 31
    gaps.no_session("predicate")
    warnings = gap_warnings(caplog)
    assert len(warnings) == 2 and "(11 calls in the last 61 s)" in warnings[1]


def test_sample_bodies_agree_job_is_in_the_snapshot():
    """The sample predicate's task job is in the sample snapshot (the tests above rely on it)."""
    job = json.loads(sample("predicate"))["task"]["Job"]
    assert job in json.loads(sample("onSessionOpen"))["Jobs"]
