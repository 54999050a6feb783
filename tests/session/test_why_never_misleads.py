"""``/why`` and ``policy-extender why`` never mislead (issue 47 item 5), in process: a victims
answer is shown as what it did (a Permit names its victims; a Volcano Abstain is no opinion, the
tier's other plugins choose; a kube-scheduler preempt with no rule applied passes every proposed
victim through), and a task shows its job's enqueue holds (its pods are then never sent to a
predicate, so the task alone has nothing)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from policy_extender.commands import why as why_command
from policy_extender.decide import kube_table, tallying
from policy_extender.decide.decisions import PerNodeVictimDecision, StatusDecision, VictimDecision
from policy_extender.decide.table import VERBS
from policy_extender.session.sqlite import SqliteStore
from policy_extender.verb_names import kube_scheduler
from policy_extender.verb_names.volcano import JOB_ENQUEUEABLE, PREEMPTABLE

HEAD = SimpleNamespace(session_id="c1", opened_at=100.0)
UID = "8379799c-38b5-481a-ad2d-f76627ecc4bd"


def pod(name: str) -> SimpleNamespace:
    return SimpleNamespace(namespace="ml", name=name)


@pytest.fixture
def tally(tmp_path):
    """A worker's tally of both verb tables (Volcano's and kube-scheduler's), as the service has."""
    verbs = [*VERBS.values(), *kube_table.KUBE_VERBS.values()]
    made = tallying.DecisionTally(SqliteStore(str(tmp_path / "s.sqlite3")), verbs, flush_seconds=3600)
    yield made
    made.close()


def record(tally, entry, head, request, decision) -> None:
    entry.tally.record(tally, head, entry.name, request, decision, entry.outcome(decision), (), "-")


def shown(tally, kind: str, name: str) -> tuple[dict, list[str]]:
    """The newest cycle's /why entry and the lines `policy-extender why` prints for it."""
    answer = tally.why(kind, name, HEAD)
    answer["tally"] = {"cycles_kept": 3}
    return answer["cycles"][0], why_command.render([answer])


def test_a_volcano_abstain_is_no_opinion_and_a_permit_names_its_victims(tally):
    evictees = [pod("batch-0"), pod("batch-1")]
    request = SimpleNamespace(evictor=pod("urgent-0"), evictees=evictees)
    record(tally, VERBS[PREEMPTABLE], HEAD, request, VictimDecision(0))  # no rule applied
    record(tally, VERBS[PREEMPTABLE], HEAD, request, VictimDecision(0))
    record(tally, VERBS[PREEMPTABLE], HEAD, request, VictimDecision(1, [0, 1]))
    cycle, lines = shown(tally, "task", "ml/urgent-0")
    assert cycle["victims"]["preemptable"] == {"calls_as_evictor": 3, "answered_abstain": 2,
                                               "answered_permit": 1, "victims_permitted": 2}
    assert lines[1] == ("task ml/urgent-0: preemptable: as evictor asked 3 times: 1 answered Permit with 2 "
                        "victims; 2 answered Abstain (no opinion: the tier's other plugins chose the victims)")
    assert not any("0 victims permitted" in line for line in lines)


def test_a_permit_that_protects_every_victim_says_so(tally):
    request = SimpleNamespace(evictor=pod("urgent-0"), evictees=[pod("web-0")])
    record(tally, VERBS[PREEMPTABLE], HEAD, request, VictimDecision(1, [], {0: "protected: web"}))
    _, lines = shown(tally, "task", "ml/urgent-0")
    assert lines[1] == ("task ml/urgent-0: preemptable: as evictor asked 1 time: 1 answered Permit with 0 "
                        "victims (every proposed victim protected)")


def test_kube_schedulers_preempt_with_no_rule_applied_passes_the_victims_through(tally):
    """kube-scheduler preempt passed 4 victims through and `why` said `0 victims permitted`."""
    entry = kube_table.KUBE_VERBS[kube_scheduler.PREEMPT]
    nodes = [SimpleNamespace(pods=[pod("a-0"), pod("a-1"), pod("a-2")]), SimpleNamespace(pods=[pod("b-0")])]
    request = SimpleNamespace(evictor=pod("train-7d9f-x2x4q"), nodes=nodes)
    record(tally, entry, HEAD, request, PerNodeVictimDecision([VictimDecision(0), VictimDecision(0)]))
    cycle, lines = shown(tally, "task", "ml/train-7d9f-x2x4q")
    assert cycle[entry.name][entry.name] == {"calls_as_evictor": 2, "answered_abstain": 2, "victims_passed_through": 4}
    assert lines[1] == (f"task ml/train-7d9f-x2x4q: {entry.name}: as evictor asked 2 times: 2 with no rule "
                        "applied: the 4 victims proposed passed through as they came")
    victim, lines = shown(tally, "task", "ml/a-1")
    assert victim[entry.name][entry.name] == {"as_evictee_passed": 1}
    assert lines[1] == f"task ml/a-1: {entry.name}: 1 times passed through as a victim (no rule applied)"


def test_kube_schedulers_preempt_where_rules_chose_counts_their_victims(tally):
    entry = kube_table.KUBE_VERBS[kube_scheduler.PREEMPT]
    request = SimpleNamespace(evictor=pod("train-7d9f-x2x4q"), nodes=[SimpleNamespace(pods=[pod("a-0"), pod("a-1")])])
    record(tally, entry, HEAD, request, PerNodeVictimDecision([VictimDecision(1, [1], {0: "low: a-0 protected"})]))
    cycle, _ = shown(tally, "task", "ml/train-7d9f-x2x4q")
    assert cycle[entry.name][entry.name] == {"calls_as_evictor": 1, "answered_permit": 1, "victims_permitted": 1}


def _rejected_at_enqueue(tally, job_name: str, times: int) -> None:
    request = SimpleNamespace(job=SimpleNamespace(namespace="ml", name=job_name))
    for _ in range(times):
        record(tally, VERBS[JOB_ENQUEUEABLE], HEAD, request,
               StatusDecision(-1, "gpu-cap (caps.policy:2)", "gpu-cap (caps.policy:2): job asks 24 GPUs, the limit is 16"))


def test_a_task_shows_its_jobs_enqueue_holds_under_the_podgroup_name(tally):
    """`why ml/job-001-worker-0` said `nothing decided about job or task` while its job was
    rejected at enqueue 3 times (Volcano's JobInfo is named by the PodGroup, `<job>-<uid>`)."""
    _rejected_at_enqueue(tally, f"job-001-{UID}", 3)
    cycle, lines = shown(tally, "task", "ml/job-001-worker-0")
    assert cycle["job"] == {"name": "ml/job-001", "podgroup": f"ml/job-001-{UID}", "enqueue": {
        "answers": {"reject": 3},
        "by_rule": {"reject": {"gpu-cap (caps.policy:2)": {
            "count": 3, "reason": "gpu-cap (caps.policy:2): job asks 24 GPUs, the limit is 16"}}}}}
    assert lines[1:] == [f"job ml/job-001 (the job of task ml/job-001-worker-0, PodGroup ml/job-001-{UID}): "
                         "enqueue rejected by gpu-cap (caps.policy:2): job asks 24 GPUs, the limit is 16 "
                         "(3 of 3 enqueue answers)"]


def test_a_task_finds_the_longest_job_name_with_answers(tally):
    _rejected_at_enqueue(tally, "job", 1)
    _rejected_at_enqueue(tally, "job-001", 2)
    cycle, _ = shown(tally, "task", "ml/job-001-ps-server-0")
    assert cycle["job"]["name"] == "ml/job-001" and cycle["job"]["enqueue"]["answers"] == {"reject": 2}


def test_a_name_that_is_no_pod_of_a_job_gets_no_job(tally):
    """Only ``<job>-<task>-<index>``: a job's own name asked as a task (``why ml/job-001`` asks
    both) and a name without an index never borrow another job's answers."""
    _rejected_at_enqueue(tally, "job", 1)
    for name in ("ml/job-001", "ml/job-worker-x", "ml/job-0"):
        answer = tally.why("task", name, HEAD)
        assert all("job" not in cycle for cycle in answer["cycles"]), name
