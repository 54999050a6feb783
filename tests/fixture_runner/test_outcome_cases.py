"""Outcome cases (``cluster:``) in fixture files: their shape checked where it is written (every
key known, did-you-mean, file:line:col), their expectations compared with what Volcano did, the
explanation of where the service's victim answers went, and the engine's one line without Go.
What Volcano's own scheduler does with them: test_outcome_engine.py (slow)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from policy_extender.fixture_runner import engine, outcome_cases, outcome_run
from policy_extender.fixture_runner.loader import load_file
from policy_extender.fixture_runner.outcome_run import OutcomeSettings
from policy_extender.fixture_runner.results import ERROR, SKIP
from policy_extender.fixture_runner.runner import run_cases

POLICY = 'victim protected: evictee.annotations["p"] != "true"\n'
CASE = """\
scheduler_conf: conf.yaml
cases:
  - name: an answer case beside it
    decision: preemptable
    input: {evictor: {name: u}, evictees: [{name: a}]}
    expect: {status: permit, victims: [a]}
  - name: the protected pod stays
    volcano: v1.15
    actions: "enqueue, allocate, preempt"
    cluster:
      priorityClasses: {high: 1000, low: 10}
      nodes: [{name: n1, allocatable: {cpu: "2", memory: 8Gi, pods: "110"}}]
      jobs:
        - name: guarded
          priorityClass: low
          phase: Running
          tasks: [{name: w, requests: {cpu: "2"}, annotations: {p: "true"}, nodes: [n1]}]
        - name: urgent
          priorityClass: high
          tasks: [{name: w, requests: {cpu: "1"}}]
    expect:
      evictions: []
      never_evicted: [default/guarded-w-0]
      why: {default/guarded-w-0: ["protected"]}
"""


def write(tmp_path: Path, text: str = CASE) -> Path:
    (tmp_path / "guard.policy").write_text(POLICY)
    (tmp_path / "conf.yaml").write_text("actions: \"allocate\"\ntiers:\n- plugins:\n  - name: extender\n")
    fixture = tmp_path / "guard.fixtures.yaml"
    fixture.write_text(text)
    return fixture


def test_an_outcome_case_loads_beside_an_answer_case(tmp_path):
    answer, outcome = load_file(write(tmp_path))
    assert answer.outcome is None and answer.decision.name == "preemptable"
    assert outcome.error is None and outcome.decision is None
    spec = outcome.outcome
    assert spec.release == "v1.15" and outcome.scheduler_conf == tmp_path / "conf.yaml"
    scenario = spec.scenario({"guard.policy": POLICY}, tmp_path / "conf.yaml", ["default/guarded-w-0"])
    assert scenario["conf"] == str((tmp_path / "conf.yaml").resolve())
    assert scenario["actions"] == "enqueue, allocate, preempt"
    assert scenario["cluster"]["jobs"][1]["priorityClass"] == "high"
    assert scenario["expect"] == {"why": {"default/guarded-w-0": []}}  # the harness only reports


@pytest.mark.parametrize("old, new, where, said", [
    ("          tasks: [{name: w, requests: {cpu: \"1\"}}]", "          tasks: [{name: w, replica: 2}]",
     ":20:29", "unknown key 'replica' in this `tasks[0]` mapping (did you mean 'replicas'?)"),
    ("      never_evicted:", "      never_evict:", ":23:7", "(did you mean 'never_evicted'?)"),
    ("    actions:", "    action:", ":9:5", "unknown key 'action' in case (did you mean 'actions'?)"),
    ("    cluster:", "    clustr:", ":10:5", "(did you mean 'cluster'?)"),
    ("      priorityClasses: {high: 1000, low: 10}", "      priorityClasses: {high: 1000}", ":15:11",
     "priority class 'low' is not in cluster.priorityClasses (high)"),
    ("      nodes: [{name: n1,", "      nodes: [{name: n1, unschedulable: 1,", ":12:",
     "`unschedulable` is true or false; got 1"),
    ("    volcano: v1.15\n", "    volcano: v1.15\n    decision: filter\n", ":9:5",
     "`decision:` belongs to an answer case"),
])
def test_a_malformed_outcome_case_says_where_and_what(tmp_path, old, new, where, said):
    assert old in CASE
    case = load_file(write(tmp_path, CASE.replace(old, new)))[1]
    assert case.error is not None, case
    assert where in str(case.error) and said in str(case.error), str(case.error)


def test_an_outcome_key_in_an_answer_case_is_refused(tmp_path):
    text = CASE.replace("    decision: preemptable\n", "    decision: preemptable\n    actions: preempt\n", 1)
    case = load_file(write(tmp_path, text))[0]
    assert "`actions:` belongs to an outcome case" in str(case.error) and ":5:5:" in str(case.error)


def test_defaults_of_one_kind_do_not_leak_into_the_other(tmp_path):
    text = CASE.replace("cases:\n", "defaults: {decision: preemptable}\ncases:\n").replace("    decision: preemptable\n", "", 1)
    answer, outcome = load_file(write(tmp_path, text))
    assert answer.error is None and outcome.error is None and outcome.outcome is not None


def test_no_outcomes_reports_them_skipped(tmp_path):
    results = run_cases(load_file(write(tmp_path)), OutcomeSettings(enabled=False)).results
    assert [r.outcome for r in results] == ["PASS", SKIP]
    assert "--no-outcomes" in results[1].message


def test_a_case_outside_since_before_is_skipped_without_an_engine(tmp_path):
    text = CASE.replace("    volcano: v1.15\n", "    volcano: v1.10.0\n    since: v1.14\n")
    result = run_cases(load_file(write(tmp_path, text))).results[1]
    assert result.outcome == SKIP and "not for Volcano v1.10.0" in result.message


def test_without_go_one_line_says_what_is_needed(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv(engine.ENGINE_DIR_ENV, raising=False)
    result = run_cases(load_file(write(tmp_path)), OutcomeSettings()).results[1]
    assert result.outcome == ERROR
    assert result.message.count("\n") == 0 and "install Go 1.24 or later" in result.message
    assert "Docker image" in result.message


@pytest.mark.parametrize("given, chosen", [(None, engine.NEWEST), ("v1.15", "v1.15.1"), ("1.10.0", "v1.10.0")])
def test_the_release_is_one_supported(given, chosen):
    assert engine.choose_release(given) == chosen


def test_an_unsupported_release_names_the_supported_ones():
    with pytest.raises(engine.EngineUnavailable, match="supported: v1.15.1, v1.14.1, v1.10.0"):
        engine.choose_release("v1.9.0")


def test_the_cached_engine_is_named_after_its_sources(tmp_path):
    source = tmp_path / "src"
    (source / "releases").mkdir(parents=True)
    (source / "main.go").write_text("package main\n")
    (source / "releases" / "v1.15.1.mod").write_text("module x\n")
    first = engine.source_hash(source, "v1.15.1")
    (source / "main.go").write_text("package main // changed\n")
    assert engine.source_hash(source, "v1.15.1") != first
    assert engine.source_hash(source, "v1.10.0") != engine.source_hash(source, "v1.15.1")


REPORT = {  # what the harness reports (e2e/volcano/outcome.go): the reclaim of a protected pod
    "binds": {}, "evictions": ["default/guarded-worker-0"], "pipelined": {"default/claimer-worker-0": "n1"},
    "phases": {"default/claimer": "Inqueue"}, "calls": {"reclaimable": 1},
    "victimCalls": [{"verb": "reclaimable", "evictor": "default/claimer-worker-0", "evictees": ["default/guarded-worker-0"],
                     "status": 1, "victims": [], "http": 200}],
    "tiers": [[{"name": "gang", "preemptable": False, "reclaimable": True},
               {"name": "extender", "preemptable": True, "reclaimable": True}],
              [{"name": "drf", "preemptable": False, "reclaimable": True},
               {"name": "proportion", "preemptable": True, "reclaimable": True}]],
    "decisions": ['policy_extender_decisions_total{outcome="evict",protocol="volcano",rule="",verb="reclaimable"} 1.0'],
}


def test_expectations_compare_as_written():
    actual = outcome_run.actual_of(REPORT)
    want = {"evictions": ["default/guarded-worker-0"], "never_evicted": ["default/guarded-worker-0"],
            "pipelined": {"default/claimer-worker-0": "*"}, "binds": {}, "phases": {"default/claimer": "Inqueue"},
            "calls": {"reclaimable": {"min": 1, "max": 1}}}
    assert outcome_run.mismatches(want, actual) == ["never_evicted"]
    assert outcome_run.mismatches({"pipelined": {"default/claimer-worker-0": ""}}, actual) == ["pipelined"]
    assert outcome_run.mismatches({"binds": {"default/x": "*"}}, actual) == ["binds"]
    assert outcome_run.mismatches({"calls": {"reclaimable": {"max": 0}}}, actual) == ["calls"]


def test_the_explanation_says_which_tier_evicted_what_the_service_protected():
    actual = outcome_run.actual_of(REPORT)
    text = outcome_run.explanation(REPORT, actual, {"never_evicted": ["default/guarded-worker-0"]})
    assert "the service answered reclaimable for default/claimer-worker-0: Permit with no victims; " \
           "protected: default/guarded-worker-0" in text
    assert "evicted default/guarded-worker-0: the service protected it" in text
    assert "tier 2 proportion" in text and "drf" not in text.split("decided from scratch:")[1].split(";")[0]
    assert "--final-victims" in text
    assert "-- default/guarded-worker-0" in outcome_run.diff({"never_evicted": ["default/guarded-worker-0"]}, actual)


def test_an_abstain_is_explained_as_handing_the_choice_over():
    report = dict(REPORT, victimCalls=[dict(REPORT["victimCalls"][0], status=0)])
    text = outcome_run.explanation(report, outcome_run.actual_of(report), {})
    assert "the service abstained, so the other reclaim plugins decided: tier 1 gang, tier 2 proportion" in text


CYCLES = CASE.replace("    expect:\n      evictions: []\n", """\
    cycles: 3
    evictionGrace: 1
    events:
      - before: 2
        cordon: [n1]
        addJobs: [{name: late, tasks: [{name: w, duration: 1, requests: {cpu: "1"}}]}]
    expect:
      cycle:
        2: {binds: {}, why: {default/late: [waits]}}
      bound_by: {default/urgent-w-0: 3}
      never_bound: [default/late-w-0]
      evictions: []
""")


def test_a_case_of_several_cycles_goes_to_the_engine_as_written(tmp_path):
    spec = load_file(write(tmp_path, CYCLES))[1].outcome
    assert spec is not None
    want = spec.expect_for("v1.15.1")
    scenario = spec.scenario({}, tmp_path / "conf.yaml", [], {n: sorted(w["why"]) for n, w in want["cycle"].items()})
    assert scenario["cycles"] == 3 and scenario["evictionGrace"] == 1
    assert scenario["events"][0]["addJobs"][0]["tasks"][0]["duration"] == 1
    assert scenario["expect"]["cycle"] == {"2": {"why": {"default/late": []}}}


@pytest.mark.parametrize("old, new, where, said", [
    ("      bound_by:", "      boundBy:", ":30:7", "(did you mean 'bound_by'?)"),
    ("      never_bound:", "      neverBound:", ":31:7", "(did you mean 'never_bound'?)"),
    ("        cordon: [n1]", "        cordn: [n1]", ":25:9", "(did you mean 'cordon'?)"),
    ("      - before: 2", "      - before: 4", ":24:9", "happens before, 2 to 3 (cycles: 3); got 4"),
    ("        2: {binds: {}", "        5: {binds: {}", ":29:9", "expect.cycle.5: the case runs cycles 1 to 3"),
    ("{default/urgent-w-0: 3}", "{default/urgent-w-0: 9}", ":30:18", "expect.bound_by.default/urgent-w-0: 9"),
    ("    evictionGrace: 1", "    evictionGrace: -1", ":22:5", "evictionGrace: -1"),
    ("duration: 1", "duration: soon", ":26:", "`duration` is an integer"),
])
def test_a_malformed_case_of_several_cycles_says_where_and_what(tmp_path, old, new, where, said):
    assert old in CYCLES
    case = load_file(write(tmp_path, CYCLES.replace(old, new)))[1]
    assert case.error is not None, case
    assert where in str(case.error) and said in str(case.error), str(case.error)


CYCLE_REPORT = {  # three cycles: b bound in cycle 1, c evicted in cycle 2, a bound in cycle 3
    "binds": {"ml/b-w-0": "n1", "ml/a-w-0": "n2"}, "evictions": ["ml/c-w-0"], "pipelined": {}, "phases": {},
    "calls": {"predicate": 5},
    "cycles": [{"binds": {"ml/b-w-0": "n1"}, "evictions": [], "calls": {"predicate": 3}},
               {"binds": {}, "evictions": ["ml/c-w-0"], "calls": {"predicate": 2},
                "why": {"ml/a": "ml/a waits: no room"}},
               {"binds": {"ml/a-w-0": "n2"}, "evictions": []}],
}


def test_several_cycles_compare_per_cycle_and_over_the_run():
    actual = outcome_run.actual_of(CYCLE_REPORT)
    good = {"binds": {"ml/b-w-0": "n1", "ml/a-w-0": "*"}, "bound_by": {"ml/a-w-0": 3, "ml/b-w-0": 1},
            "never_bound": ["ml/c-w-0"], "never_evicted": ["ml/a-w-0"],
            "cycle": {1: {"binds": {"ml/b-w-0": "n1"}, "calls": {"predicate": {"min": 3, "max": 3}}},
                      2: {"binds": {}, "evictions": ["ml/c-w-0"], "why": {"ml/a": ["no room"]}}}}
    assert outcome_run.mismatches(good, actual) == []
    bad = {"bound_by": {"ml/a-w-0": 2}, "never_bound": ["ml/b-w-0"], "never_evicted": ["ml/c-w-0"],
           "cycle": {2: {"binds": {"ml/a-w-0": "n2"}, "evictions": ["ml/c-w-0"]}, 3: {"evictions": ["ml/b-w-0"]}}}
    wrong = outcome_run.mismatches(bad, actual)
    assert wrong == ["bound_by", "never_bound", "never_evicted", "cycle.2.binds", "cycle.3.evictions"]
    text = outcome_run.diff(bad, actual, wrong)
    assert "-  ml/a-w-0: 2\n+  ml/a-w-0: 3" in text, text
    assert " cycle:\n   2:\n" in text and "+    evictions: []" in text and "+never_bound: []" in text, text


def test_a_cycle_that_never_ran_is_said():
    report = dict(CYCLE_REPORT, cycles=CYCLE_REPORT["cycles"][:1], panic="boom")
    actual = outcome_run.actual_of(report)
    assert outcome_run.mismatches({"cycle": {2: {"binds": {}}}}, actual) == ["cycle.2"]
    assert "not run" in outcome_run.diff({"cycle": {2: {"binds": {}}}}, actual, ["cycle.2"])


VCJOB = CASE.replace("""        - name: urgent
          priorityClass: high
""", """        - name: urgent
          priorityClass: high
          pods: after-enqueue
          minResources: {cpu: "1"}
""")


def test_a_volcano_job_whose_pods_come_after_enqueue_goes_to_the_engine_as_written(tmp_path):
    spec = load_file(write(tmp_path, VCJOB))[1].outcome
    assert spec is not None
    jobs = spec.scenario({}, tmp_path / "conf.yaml", [])["cluster"]["jobs"]
    assert [job.get("pods") for job in jobs] == [None, "after-enqueue"]


@pytest.mark.parametrize("old, new, where, said", [
    ("pods: after-enqueue", "pods: after_enqueue", ":20:11",
     "job urgent: `pods: after_enqueue` is not known (did you mean 'after-enqueue'?): write `present` (the default"),
    ("pods: after-enqueue", "pods: later", ":20:11", "job urgent: `pods: later` is not known: write `present`"),
    ("pods: after-enqueue", "pods: [after-enqueue]", ":20:11", "`pods` is a string"),
    ("          minResources: {cpu: \"1\"}\n", "", ":20:11",
     "job urgent: `pods: after-enqueue` needs `minResources:`: Volcano's job controller always sets them"),
    ("          pods: after-enqueue\n", "          pods: after-enqueue\n          phase: Running\n", ":21:11",
     "job urgent: `phase: Running` with `pods: after-enqueue`: the controller creates the pods of a PodGroup"),
    ("tasks: [{name: w, requests: {cpu: \"1\"}}]", "tasks: [{name: w, requests: {cpu: \"1\"}, nodes: [n1]}]",
     ":22:59", "job urgent: replica 0 of task w runs on 'n1', but with `pods: after-enqueue` no pod exists"),
])
def test_a_wrong_pods_option_says_where_what_and_how_to_fix_it(tmp_path, old, new, where, said):
    assert old in VCJOB
    case = load_file(write(tmp_path, VCJOB.replace(old, new)))[1]
    assert case.error is not None, case
    assert where in str(case.error) and said in str(case.error), str(case.error)


def test_a_job_an_event_adds_is_checked_for_its_pods_option_too(tmp_path):
    text = CYCLES.replace("addJobs: [{name: late, tasks:", "addJobs: [{name: late, pods: after-enqueue, tasks:")
    case = load_file(write(tmp_path, text))[1]
    assert "guard.fixtures.yaml:26:" in str(case.error) and "job late: `pods: after-enqueue` needs " \
        "`minResources:`" in str(case.error), str(case.error)
    fixed = text.replace("pods: after-enqueue,", "pods: after-enqueue, minResources: {cpu: \"1\"},")
    assert load_file(write(tmp_path, fixed))[1].error is None


@pytest.mark.parametrize("struct, schema", [
    ("Cluster", outcome_cases.CLUSTER), ("Job", outcome_cases.JOB), ("Task", outcome_cases.TASK),
    ("Node", outcome_cases.NODE), ("Queue", outcome_cases.QUEUE), ("Taint", outcome_cases.TAINT),
    ("Event", outcome_cases.EVENT)])
def test_the_case_schema_has_the_keys_the_engine_decodes(struct, schema):
    """Each schema of outcome_cases against the json tags of its struct in e2e/volcano/scenario.go:
    a key the runner accepted but the engine ignored (or refused) would be a case that tests nothing."""
    go = (Path(__file__).parents[2] / "e2e" / "volcano" / "scenario.go").read_text(encoding="utf-8")
    body = re.search(rf"^type {struct} struct {{\n(.*?)^}}", go, re.S | re.M)
    assert body is not None, struct
    assert set(re.findall(r'json:"([^",]+)', body.group(1))) - {"-"} == set(schema)
