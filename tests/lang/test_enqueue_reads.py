"""W401 (lang/enqueue_reads.py): an enqueue rule that reads job.total_request or job.tasks, which a
Volcano Job leaves empty until its PodGroup is Inqueue, and not what its PodGroup asks
(job.min_resources). The goldens of its text are tests/lang/cases/enqueue.yaml."""

from __future__ import annotations

from pathlib import Path

import pytest

from policy_extender.commands.check import check_set
from policy_extender.lang.program import analyse
from policy_extender.policyset import compile_sources
from policy_extender.schema import TYPES

from .harness import decide

ROOT = Path(__file__).parents[2]
POLICIES = ROOT / "policies"


def warned(sources: dict[str, str]) -> list:
    return [w for w in compile_sources(sources).warnings if w.code == "W401"]


def at(warning) -> tuple:
    return (warning.span.file, warning.span.line, warning.span.column, warning.span.end_line, warning.span.end_column)


def test_total_request_alone_warns_at_the_field_and_says_what_and_how():
    [w] = warned({"cap.policy": "# the cap\nenqueue gpu-cap: job.total_request.gpu <= 16\n"})
    assert w.severity == "warning"
    assert at(w) == ("cap.policy", 2, 18, 2, 35)  # job.total_request, under its own text
    assert "at enqueue a Volcano Job has no pods yet: job.total_request is 0 and job.tasks is empty" in w.message
    assert "max(job.total_request.gpu, job.min_resources.gpu)" in w.hint
    assert "W401" in w.render("# the cap\nenqueue gpu-cap: job.total_request.gpu <= 16\n").splitlines()[0]


def test_a_resource_read_by_its_full_name_is_rewritten_as_written():
    [w] = warned({"c.policy": 'enqueue mem: job.total_request["nvidia.com/gpumem"] <= 80\n'})
    assert 'max(job.total_request["nvidia.com/gpumem"], job.min_resources["nvidia.com/gpumem"])' in w.hint


def test_job_tasks_through_a_let_warns_at_the_read_in_the_let():
    text = "let gpu_tasks = count(t for t in job.tasks if t.requests.gpu > 0)\n\nenqueue few: gpu_tasks <= 4\n"
    [w] = warned({"few.policy": text})
    assert at(w) == ("few.policy", 1, 34, 1, 43)  # `job.tasks` inside the let
    assert "enqueue rule 'few' reads job.tasks (through let 'gpu_tasks', read by the rule at line 3)" in w.message
    assert "job.min_available" in w.hint and "job.min_resources" in w.hint


def test_a_shared_let_in_another_file_names_the_rules_file():
    [w] = warned({"a.policy": "shared let asked = job.total_request.cpu\n",
                  "b.policy": "enqueue cpu-cap: asked <= 64\n"})
    assert at(w)[:3] == ("a.policy", 1, 20)
    assert "read by the rule at b.policy:1" in w.message


@pytest.mark.parametrize("where", [
    "when job.total_request.gpu > 0\nenqueue e: job.priority >= 0\n",  # the file guard
    "enqueue e: job.priority >= 0\n    when job.total_request.gpu > 0\n",  # its when
    'enqueue e: job.priority >= 0\n    reason "asks {job.total_request.gpu}"\n',  # its reason
    "let j = job\nenqueue e: j.total_request.gpu <= 16\n",  # a let that is the job
])
def test_every_part_of_the_rule_counts(where):
    [w] = warned({"e.policy": where})
    assert "job.total_request" in w.message


@pytest.mark.parametrize("text", [
    "enqueue e: max(job.total_request.gpu, job.min_resources.gpu) <= 16\n",
    "enqueue e: job.min_resources.gpu <= 16\n",
    "let asked = max(job.total_request.gpu, job.min_resources.gpu)\nenqueue e: asked <= 16\n",
    # total_request in the reason, min_resources in the expression: the rule reads both
    'enqueue e: job.min_resources.gpu <= 16\n    reason "asks {job.total_request.gpu}"\n',
    "enqueue e: max(count(job.tasks), job.min_available) <= 8\n",
    "enqueue e: count(job.tasks) <= 8 and job.min_resources.cpu <= 64\n",
    # the other kinds see a job with pods, and an enqueue rule that reads neither field is silent
    "ready r: count(job.tasks) >= job.min_available\nfilter f: task.job.total_request.gpu <= 16\n",
    "score s: job.total_request.gpu\nenqueue e: job.priority >= 0\n",
    # session.job counts this cycle's allocations, not the job's pods
    "enqueue e: session.job.tasks <= 8\n",
])
def test_silent_when_the_rule_reads_what_the_podgroup_asks_or_is_no_enqueue_rule(text):
    assert warned({"e.policy": text}) == []


def test_total_request_is_not_excused_by_min_available():
    assert [w.code for w in warned({"e.policy": "enqueue e: job.total_request.gpu <= job.min_available * 2\n"})] \
        == ["W401"]


def test_one_warning_per_rule_and_one_per_rule_that_reads_a_shared_let():
    text = ("let asked = job.total_request.gpu\n"
            "enqueue a: asked <= 16 and job.total_request.cpu <= 64 and count(job.tasks) < 9\n"
            "enqueue b: asked >= 0\n")
    assert sorted(w.message.split("'")[1] for w in warned({"e.policy": text})) == ["a", "b"]


def test_a_set_with_the_warning_loads_and_decides():
    text = "enqueue gpu-cap: job.total_request.gpu <= 16\n"
    policy_set = compile_sources({"cap.policy": text})
    assert [r.name for r in policy_set.rules] == ["gpu-cap"] and policy_set.warnings
    analysis = analyse({"cap.policy": text})  # what check, serve's load report and the language server show
    assert analysis.checked is not None and [d.code for d in analysis.diagnostics] == ["W401"]
    assert not analysis.errors
    asked = decide({"verb": "jobEnqueueable", "policy": text, "input": {
        "job": {"TotalRequest": {"ScalarResources": {"nvidia.com/gpu": 32000}}}}})
    assert asked["status"] == -1 and asked["rule"] == "gpu-cap"


def test_the_shipped_queue_cap_is_silent_and_would_not_be_with_total_request_alone():
    text = (POLICIES / "queue-cap.policy").read_text()
    assert "max(job.total_request.gpu, job.min_resources.gpu)" in text
    assert warned({"queue-cap.policy": text}) == []
    before = text.replace("max(job.total_request.gpu, job.min_resources.gpu)", "job.total_request.gpu")
    assert [w.message.split("'")[1] for w in warned({"queue-cap.policy": before})] == ["gpu-cap"]


def test_every_shipped_set_under_policies_is_silent():
    sets = sorted({p.parent for p in POLICIES.rglob("*.policy")})
    assert POLICIES in sets and POLICIES / "library" in sets
    for directory in sets:
        report = check_set((directory,))
        assert not report["diagnostics"], report["rendered"]
        assert [w for w in report["warnings"] if w["code"] == "W401"] == [], report["rendered"]


def test_the_field_docs_say_so():
    job = TYPES["job"]
    assert "0 at enqueue for a Volcano Job" in job["total_request"].doc and "min_resources" in job["total_request"].doc
    assert "empty at enqueue for a Volcano Job" in job["tasks"].doc and "min_resources" in job["tasks"].doc
