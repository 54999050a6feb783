"""Recorded decisions into fixture files that the fixture runner passes."""

from __future__ import annotations

from policy_extender.fixture_runner.results import PASS
from policy_extender.fixture_runner.runner import run_paths
from tests.support.policies import write_policies
from tests.support.recorded import RECORDED, ZONE_ADDED


def test_to_fixtures_output_passes_the_fixture_runner(record, replay, tmp_path):
    recording = record(ZONE_ADDED)
    policies = write_policies(tmp_path / "zone", ZONE_ADDED)
    out = tmp_path / "fixtures"
    status, stdout, _ = replay(recording, "--policies", policies, "--to-fixtures", out)
    assert status == 0 and stdout.startswith("12 cases in 1 fixture files")
    results = run_paths([out]).results
    assert len(results) == 12 and all(r.outcome == PASS for r in results), \
        [(r.case.name, r.message, r.diff) for r in results if r.outcome != PASS]


def test_expectations_are_the_policies_answers(record, replay, tmp_path):
    recording = record(ZONE_ADDED)
    out = tmp_path / "fixtures"
    replay(recording, "--policies", write_policies(tmp_path / "zone", ZONE_ADDED), "--to-fixtures", out)
    text = next(out.glob("*.fixtures.yaml")).read_text()
    assert text.count("rule: zone-a-only") == 3 and text.count("fits: true") == 3


def test_k_chooses_cases_by_verb_task_or_node(record, replay, tmp_path):
    recording = record()
    out = tmp_path / "fixtures"
    status, stdout, _ = replay(recording, "--policies", write_policies(tmp_path / "p", RECORDED),
                               "--to-fixtures", out, "-k", "node-0005")
    assert status == 0 and stdout.startswith("1 cases")
    results = run_paths([out]).results
    assert [r.case.name for r in results] == ["#7 predicate ml/job-002-worker-0 on node-0005"]
    assert results[0].outcome == PASS


def test_fixtures_of_a_cycle_with_allocations_carry_them(record, replay, tmp_path):
    recording = record()
    out = tmp_path / "fixtures"
    replay(recording, "--policies", write_policies(tmp_path / "p", RECORDED), "--to-fixtures", out,
           "-k", "jobReady")
    text = next(out.glob("*.fixtures.yaml")).read_text()
    assert "allocations:\n    - name:" in text and "node_name:" in text
    assert all(r.outcome == PASS for r in run_paths([out]).results)


def test_replay_with_a_values_file_writes_it_into_the_fixtures(record, replay, tmp_path):
    """``replay --values FILE`` (issue 47 item 1): the candidate is the directory with the cluster's
    values file, and the fixture files name it with ``values:``, so they pass as written."""
    recording = record()
    policies = dict(RECORDED)
    policies["cycle.policy"] = "param weight: number = 10\n" + policies["cycle.policy"].replace(
        "score gpu: 10 * free_gpu", "score gpu: weight * free_gpu")
    directory = write_policies(tmp_path / "p", policies)
    values = tmp_path / "clusters" / "prod-values.yaml"
    values.parent.mkdir()
    values.write_text("cycle.weight: 3\n")
    out = tmp_path / "fixtures"
    status, stdout, stderr = replay(recording, "--policies", directory, "--values", values, "--to-fixtures", out)
    assert status == 0, stderr
    text = next(out.glob("*.fixtures.yaml")).read_text()
    assert "values: ../clusters/prod-values.yaml" in text and "prod-values.yaml\n" not in text.split("cases:")[0].split("values:")[0]
    results = run_paths([out]).results
    assert results and all(r.outcome == PASS for r in results), [(r.case.name, r.message) for r in results if r.outcome != PASS]
