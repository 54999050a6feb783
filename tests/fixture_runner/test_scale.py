"""``check --scale``: every rule alone on a generated cluster (fixture_runner/scale.py), its worst
call's elements counted by the call budget (issue 47 item 4). Counts and codes here; times are
whatever the machine gives and are only printed."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from policy_extender.fixture_runner.scale import Bench, Scale, generate
from policy_extender.policyset import compile_sources

from tests.support.fixture_dirs import REPO

RULES = """\
score linear: count(m for m in cluster.nodes if m.ready)
score own: node.idle.gpu
filter busy: count(t for t in node.tasks if t.priority > 3) < 100
enqueue wide: count(n for n in cluster.nodes if n.idle.gpu >= 8) >= 0
enqueue placed: count(a for a in session.allocations if a.job == "ml/scale-placing") >= 0
victim low: evictee.priority < evictor.priority
"""


def test_the_scale_is_parsed_with_defaults_and_refused_with_the_form():
    assert Scale.parse("nodes=2000,tasks=60000,allocations=600") == Scale(2000, 60000, 600)
    assert Scale.parse("nodes=100") == Scale(100, 2000, 25)
    for bad in ("tasks=5", "nodes=0", "nodes=ten", "pods=3,nodes=2", "nodes"):
        with pytest.raises(ValueError, match="nodes=N"):
            Scale.parse(bad)


def test_the_generated_cluster_has_the_sizes_asked():
    cluster = generate(Scale(30, 95, 7))
    assert len(cluster["nodes"]) == 30
    assert sum(len(n["tasks"]) for n in cluster["nodes"]) == 95
    assert {len(n["tasks"]) for n in cluster["nodes"]} == {3, 4}  # spread evenly
    assert sum(len(j["tasks"]) for j in cluster["jobs"]) == 95 + 8 + 7  # running, the subject, the placing job
    assert len(cluster["allocations"]) == 7


def test_each_rule_is_measured_alone_with_the_elements_its_worst_call_visits():
    bench = Bench(compile_sources({"c.policy": RULES}), Scale(40, 200, 10))
    try:
        measured = {(m.rule, m.verb): m for m in bench.measure()}
    finally:
        bench.close()
    elements = {key: m.elements for key, m in measured.items()}
    assert elements == {
        ("linear", "prioritize"): 40 * 40,       # N evaluations x N nodes
        ("own", "prioritize"): 0,
        ("busy", "predicate"): 5,                 # the tasks of one node (a rejection would explain: twice)
        ("wide", "jobEnqueueable"): 40,
        ("placed", "jobEnqueueable"): 10,
        ("low", "preemptable"): 0,
        ("low", "reclaimable"): 0,
    }
    assert not any(m.error for m in measured.values())
    assert list(measured)[0] == ("linear", "prioritize")  # worst first


@pytest.mark.slow  # a subprocess, and a million elements visited
def test_check_scale_reports_the_worst_rule_and_exits_1_when_it_errs_there(tmp_path):
    (tmp_path / "c.policy").write_text(RULES)
    done = subprocess.run([sys.executable, "-m", "policy_extender", "check", "--cost", "--scale",
                           "nodes=1001,tasks=2002,allocations=10", str(tmp_path)],
                          capture_output=True, text=True, cwd=REPO, timeout=300)
    assert done.returncode == 1, done.stderr
    lines = done.stdout.splitlines()
    assert any(line.split() == [f"{tmp_path}/c.policy:1", "linear", "score", "N^2", "quadratic:", "W501"] for line in lines)
    assert any(line.startswith("  linear ") and line.endswith("E512") for line in lines)
    assert lines[-2].startswith(f"worst: rule 'linear' ({tmp_path}/c.policy:1, prioritize): 1,000,000 elements, ")
    assert lines[-2].endswith(" ms a call, E512")
    assert "warning[W501]: rule 'linear' costs about N^2 elements a call" in done.stderr
    document = json.loads(subprocess.run(
        [sys.executable, "-m", "policy_extender", "check", "--format", "json", "--scale", "nodes=50,tasks=100",
         str(tmp_path)], capture_output=True, text=True, cwd=REPO, timeout=300).stdout)
    [report] = document["sets"]
    assert report["scale"]["rules"][0]["rule"] == "linear" and report["scale"]["rules"][0]["elements"] == 2500
