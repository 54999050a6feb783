"""Outcome cases through Volcano's own scheduler (the engine: e2e/volcano, built into the user's
cache by the first run): the shipped policies' protection holds with the shipped conf and not
without --final-victims, the e2e suite's own cases load and run through the same runner, and a
machine without Go gets one line. Slow: each case starts a real serve (1 to 3 s)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

from policy_extender.fixture_runner.runner import load_cases

from tests.support.fixture_dirs import REPO

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1600)]
UNFINAL = REPO / "e2e" / "volcano" / "confs" / "without-final-victims.conf"


def cli(*args, env=None, timeout=1500):
    return subprocess.run([sys.executable, "-m", "policy_extender", *args], cwd=REPO, capture_output=True,
                          text=True, timeout=timeout, env={**os.environ, **(env or {})})


def test_the_shipped_protection_holds_in_the_cluster_and_reports_like_answer_cases(tmp_path):
    junit = tmp_path / "report.xml"
    done = cli("test", "policies/preemption.fixtures.yaml", "-k", "in the cluster", "--json", "--junit", str(junit),
               "--coverage")
    report = json.loads(done.stdout)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert [r["outcome"] for r in report["results"]] == ["PASS"] * 4
    assert {r["decision"] for r in report["results"]} == {"outcome"}
    reclaim = next(r for r in report["results"] if "reclaim never evicts" in r["name"])
    assert reclaim["actual"]["evictions"] == [] and reclaim["actual"]["calls"]["reclaimable"] >= 1
    # the outcome cases alone exercise the protecting rule (the service's /why quotes it)
    exercised = {r["rule"] for r in report["coverage"]["per_rule"] if r["outcomes"]}
    assert "protected" in exercised
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite.get("tests") == "4" and suite.get("failures") == "0"


def test_without_final_victims_proportion_evicts_the_protected_pod_and_the_explanation_says_so():
    done = cli("test", "policies/preemption.fixtures.yaml", "-k", "reclaim never evicts", "--scheduler-conf", str(UNFINAL))
    assert done.returncode == 1, done.stdout
    assert "expected evictions, never_evicted, pipelined did not hold" in done.stdout
    assert "+- default/guarded-worker-0" in done.stdout
    assert "evicted default/guarded-worker-0: the service protected it, but its tier ended with no victims and " \
           "a later tier decided from scratch: tier 2 proportion" in done.stdout


def test_the_e2e_cases_are_outcome_cases_of_the_same_format():
    cases = load_cases([REPO / "e2e" / "volcano" / "cases"])
    assert len(cases) >= 40 and [c for c in cases if c.error] == []
    assert all(c.outcome is not None for c in cases)
    assert not (REPO / "e2e" / "volcano" / "scenarios").exists()  # one copy of the suite


def test_an_e2e_case_runs_through_policy_extender_test():
    done = cli("test", "e2e/volcano/cases/filter.fixtures.yaml", "-k", "filter-zone")
    assert done.returncode == 0 and done.stdout.splitlines()[-1] == "1 passed, 0 failed", done.stdout + done.stderr


def test_pytest_collects_outcome_cases_as_items():
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-k", "cluster",
                           "policies/preemption.fixtures.yaml"], cwd=REPO, capture_output=True, text=True, timeout=1500)
    assert done.returncode == 0 and "4 passed" in done.stdout.splitlines()[-1], done.stdout[-3000:]


def test_without_go_or_an_engine_one_line_says_what_is_needed(tmp_path):
    bare = tmp_path / "bin"
    bare.mkdir()
    done = subprocess.run([sys.executable, "-m", "policy_extender", "test", "policies/preemption.fixtures.yaml", "-q",
                           "-k", "in the cluster, preempt evicts the unprotected"], cwd=REPO, capture_output=True,
                          text=True, timeout=120,
                          env={"PATH": str(bare), "HOME": str(tmp_path), "XDG_CACHE_HOME": str(tmp_path / "cache")})
    assert done.returncode == 1
    lines = [line for line in done.stdout.splitlines() if "need" in line]
    assert len(lines) == 1 and "install Go 1.24 or later" in lines[0] and "Docker image" in lines[0], done.stdout


def test_a_case_of_several_cycles_passes_and_a_wrong_cycle_expectation_fails_naming_the_cycle(tmp_path):
    """cycles-node-removed through the runner as written (3 cycles, events between them), then with
    cycle 2 expected to bind c on n1 (c waits until a's pod is deleted before cycle 3)."""
    source = (REPO / "e2e" / "volcano" / "cases" / "cycles.fixtures.yaml").read_text()
    done = cli("test", "e2e/volcano/cases/cycles.fixtures.yaml", "-k", "cycles-node-removed", "--json")
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    (result,) = json.loads(done.stdout)["results"]
    cycles = result["actual"]["cycles"]
    assert [c["binds"] for c in cycles] == [{"default/b-worker-0": "n2"}, {}, {"default/c-worker-0": "n1"}]
    right = "        2:\n          binds: {}\n        3:\n          binds: {default/c-worker-0: n1}\n"
    assert source.count(right) == 1
    wrong = source.replace(right, right.replace("binds: {}", "binds: {default/c-worker-0: n1}"))
    assert wrong != source
    fixture = tmp_path / "cycles.fixtures.yaml"
    fixture.write_text(wrong.replace("../../../", str(REPO) + "/"))
    done = cli("test", str(fixture), "-k", "cycles-node-removed")
    assert done.returncode == 1, done.stdout
    assert "expected cycle.2.binds did not hold" in done.stdout, done.stdout
    shown = [line.strip() for line in done.stdout.splitlines()]
    assert shown[shown.index("cycle:"):][:5] == ["cycle:", "2:", "-    binds:", "-      default/c-worker-0: n1",
                                                 "+    binds: {}"], done.stdout
