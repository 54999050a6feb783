"""``policy-extender simulate``: the difference of two outcomes (fast), the command's errors
(fast), and Volcano's own scheduler on a real recording and on a hand-written case (slow: the
engine is the e2e harness, built with Go)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from policy_extender.cli import main
from policy_extender.commands.simulate import OutcomeChange, changes_text, diff_outcomes, recorded_placements
from policy_extender.replay.reading import RecordedCall

HERE = Path(__file__).resolve().parent / "simulate"
CASE, CURRENT, CANDIDATE = HERE / "cluster.yaml", HERE / "current", HERE / "candidate"


def outcome(binds=None, evictions=(), pipelined=None, phases=None, panic=""):
    return {"binds": binds or {}, "evictions": list(evictions), "pipelined": pipelined or {},
            "phases": phases or {}, "calls": {}, "panic": panic}


def test_a_moved_bind_a_new_bind_and_a_lost_bind_are_each_a_change():
    before = outcome(binds={"ml/a-0": "n1", "ml/b-0": "n1", "ml/c-0": "n2"})
    after = outcome(binds={"ml/a-0": "n2", "ml/c-0": "n2", "ml/d-0": "n3"})
    assert [(c.kind, c.subject, c.text) for c in diff_outcomes(before, after)] == [
        ("bind", "ml/a-0", "n1 -> n2"),
        ("bind", "ml/b-0", "no longer bound (was n1)"),
        ("bind", "ml/d-0", "now bound to n3 (was not bound)"),
    ]


def test_evictions_added_and_gone_pipelining_and_jobs_admitted_or_held():
    before = outcome(evictions=["ml/old-0"], pipelined={"ml/u-0": "n1"},
                     phases={"ml/big": "Pending", "ml/small": "Inqueue", "ml/same": "Running"})
    after = outcome(evictions=["ml/new-0"], pipelined={},
                    phases={"ml/big": "Inqueue", "ml/small": "Pending", "ml/same": "Running"})
    assert [(c.kind, c.subject, c.text) for c in diff_outcomes(before, after)] == [
        ("eviction", "ml/new-0", "now evicted"),
        ("eviction", "ml/old-0", "no longer evicted"),
        ("pipelined", "ml/u-0", "no longer pipelined (was n1)"),
        ("job", "ml/big", "admitted (Pending -> Inqueue)"),
        ("job", "ml/small", "held (Inqueue -> Pending)"),
    ]


def test_the_same_outcome_is_no_change_and_a_panic_is_one():
    same = outcome(binds={"ml/a-0": "n1"}, phases={"ml/a": "Running"})
    assert diff_outcomes(same, dict(same)) == []
    assert [c.text for c in diff_outcomes(same, {**same, "panic": "nil pointer"})] == ["Volcano panics: nil pointer"]


def test_changes_are_printed_one_per_line_in_columns():
    text = changes_text([OutcomeChange("bind", "ml/a-0", "n1", "n2", "n1 -> n2"),
                         OutcomeChange("eviction", "ml/long-name-0", "", "evicted", "now evicted")])
    assert text.splitlines() == ["  bind       ml/a-0          n1 -> n2",
                                 "  eviction   ml/long-name-0  now evicted"]


def event(verb: str, pod: str, node: str = "", status: int = 200) -> RecordedCall:
    ns, name = pod.split("/")
    body = json.dumps({"task": {"Namespace": ns, "Name": name, "NodeName": node}}).encode()
    return RecordedCall(verb, status, "v1", 0, 1, 0, body, b"{}", "f:0")


def test_a_recorded_cycle_placed_what_its_allocations_kept():
    calls = [event("onSessionOpen", "x/x"),
             event("allocateFunc", "ml/a-0", "n1"),                                  # bound
             event("allocateFunc", "ml/g-0", "n1"), event("deallocateFunc", "ml/g-0"),  # a gang discarded
             event("deallocateFunc", "ml/v-0"), event("allocateFunc", "ml/v-0", "n2"),  # an eviction undone
             event("deallocateFunc", "ml/w-0"),                                       # an eviction
             event("allocateFunc", "ml/p-0", "n2"),                                  # pipelined
             event("allocateFunc", "ml/f-0", "n3", status=503)]                      # refused: not counted
    assert recorded_placements(calls) == {"ml/a-0": "n1", "ml/p-0": "n2"}
    assert recorded_placements(calls[:1]) is None  # Volcano before v1.13 sends no allocateFunc


def test_a_recording_needs_the_current_set_and_says_so(tmp_path, capsys):
    assert main(["simulate", "--recording", str(tmp_path), "--policies", str(CANDIDATE)]) == 2
    assert "--recording needs --against CURRENT" in capsys.readouterr().err


def test_a_missing_recording_or_case_is_one_line_saying_what_to_do(tmp_path, capsys):
    assert main(["simulate", "--recording", str(tmp_path / "nope"), "--against", str(CURRENT),
                 "--policies", str(CANDIDATE)]) == 2
    assert "no such recording directory; record one with `policy-extender serve --record DIR`" in capsys.readouterr().err
    assert main(["simulate", str(tmp_path / "case.yaml")]) == 2
    assert "case.yaml: no such case file" in capsys.readouterr().err
    assert main(["simulate"]) == 2
    assert "give a CASE.yaml to run, or --recording DIR" in capsys.readouterr().err


def test_a_candidate_that_does_not_compile_is_reported_with_its_position(tmp_path, capsys):
    (tmp_path / "bad.policy").write_text("filter broken: node.name ==\n")
    (tmp_path / "rec").mkdir()
    assert main(["simulate", "--recording", str(tmp_path / "rec"), "--against", str(CURRENT),
                 "--policies", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "the candidate policies in" in err and "bad.policy:1:" in err


def test_a_recording_without_an_open_cycle_is_an_error(tmp_path, capsys):
    (tmp_path / "rec" / "20250101T000000.000Z-x").mkdir(parents=True)
    assert main(["simulate", "--recording", str(tmp_path / "rec"), "--against", str(CURRENT),
                 "--policies", str(CANDIDATE)]) == 2
    assert "no recorded cycle with an onSessionOpen snapshot" in capsys.readouterr().err


def test_without_go_and_without_a_built_engine_one_line_says_what_is_needed(tmp_path, monkeypatch, capsys):
    """simulate finds its engine where the outcome cases do (fixture_runner/engine.py)."""
    from policy_extender.fixture_runner import engine
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv(engine.ENGINE_DIR_ENV, raising=False)
    assert main(["simulate", str(CASE), "--policies", str(CURRENT)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "install Go 1.24 or later" in err and "Docker image" in err, err


def test_a_values_file_not_named_as_one_is_refused_with_the_fix(tmp_path, capsys):
    (tmp_path / "rec").mkdir()
    (tmp_path / "green.yaml").write_text("pools.pool: green\n")
    assert main(["simulate", "--recording", str(tmp_path / "rec"), "--against", str(CURRENT),
                 "--policies", str(CANDIDATE), "--values", str(tmp_path / "green.yaml")]) == 2
    err = capsys.readouterr().err
    assert "green.yaml: a values file's name ends in values.yaml" in err and "rename it" in err, err


def test_a_values_file_that_sets_no_parameter_of_the_set_is_reported_with_its_position(tmp_path, capsys):
    (tmp_path / "rec").mkdir()
    values = tmp_path / "dev-values.yaml"
    values.write_text("pools.pool: green\n")  # CURRENT's pools.policy declares no parameter
    assert main(["simulate", "--recording", str(tmp_path / "rec"), "--against", str(CURRENT),
                 "--policies", str(HERE / "pooled"), "--values", str(values)]) == 2
    err = capsys.readouterr().err
    assert "the current policies in" in err and f"with {values} do not compile" in err and "E207" in err, err


# -- Volcano's own scheduler (slow) ---------------------------------------------------------------

def simulate(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "policy_extender", "simulate", *args],
                          capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def recordings(tmp_path_factory):
    """Two real cycles of Volcano's scheduler against `serve --record` on the current set: one
    recorded raw, one with --record-redact annotations (the annotations tying pods to their
    PodGroups blanked)."""
    from policy_extender.fixture_runner.engine import simulate as run_engine
    root = tmp_path_factory.mktemp("recordings")
    out = {}
    for name, extra in (("raw", []), ("redacted", ["--record-redact", "annotations"])):
        directory = root / name
        recorded = run_engine("v1.15.1", str(CASE), str(CURRENT), serve_args=["--record", str(directory), *extra])
        assert recorded["cycles"][0]["binds"] == {"ml/train-worker-0": "n1"}
        out[name] = directory
    return out


@pytest.mark.slow
@pytest.mark.timeout(1200)  # the first build of the engine compiles Volcano
@pytest.mark.parametrize("kind", ["raw", "redacted"])
def test_a_candidate_that_moves_a_bind_on_a_recorded_cycle_prints_it_and_exits_1(recordings, kind):
    run = simulate("--recording", str(recordings[kind]), "--against", str(CURRENT), "--policies", str(CANDIDATE))
    assert run.returncode == 1, run.stdout + run.stderr
    lines = run.stdout.splitlines()
    assert lines[0].startswith("cycle ") and lines[0].endswith(": 1 change")
    assert lines[1].split() == ["bind", "ml/train-worker-0", "n1", "->", "n2"]
    assert lines[-1].endswith(f"{CURRENT} -> {CANDIDATE}): 1 change")


@pytest.mark.slow
@pytest.mark.timeout(1200)
@pytest.mark.parametrize("kind", ["raw", "redacted"])
def test_the_rebuilt_snapshot_does_what_the_recorded_cycle_did_and_the_same_set_changes_nothing(recordings, kind):
    run = simulate("--recording", str(recordings[kind]), "--against", str(CURRENT), "--policies", str(CURRENT),
                   "--json")
    assert run.returncode == 0, run.stdout + run.stderr
    report = json.loads(run.stdout)
    (cycle,) = report["cycles"]
    # No note: the current set's run places what the recorded cycle's allocateFunc calls placed.
    assert report["total"] == 0 and cycle["notes"] == []
    # The cluster rebuilt from onSessionOpen alone: the running pod keeps n1, the pending one
    # goes where the recorded cycle put it, every PodGroup under its job's name and phase (in
    # a redacted recording too, whose pods lost the annotations naming their PodGroups).
    assert cycle["current"]["binds"] == {"ml/train-worker-0": "n1"}
    assert cycle["current"]["phases"] == {"ml/running": "Running", "ml/train": "Inqueue"}
    assert cycle["current"]["calls"]["predicate"] == 2


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_a_set_other_than_the_recorded_one_is_noted(recordings):
    run = simulate("--recording", str(recordings["raw"]), "--against", str(CANDIDATE), "--policies", str(CURRENT))
    assert run.returncode == 1
    assert "note: the recording was answered by policy version" in run.stdout


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_a_run_that_does_not_place_what_the_recorded_cycle_placed_is_noted(recordings):
    run = simulate("--recording", str(recordings["raw"]), "--against", str(CURRENT), "--policies", str(CURRENT),
                   "--actions", "enqueue")
    assert run.returncode == 0, run.stdout + run.stderr
    assert ("note: the recorded cycle placed ml/train-worker-0 on n1 (its allocateFunc and deallocateFunc "
            f"calls); run again with {CURRENT} Volcano places nothing") in run.stdout


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_a_case_prints_each_cycle_and_why():
    run = simulate(str(CASE), "--policies", str(CURRENT))
    assert run.returncode == 0, run.stdout + run.stderr
    assert "  bound ml/train-worker-0 -> n1" in run.stdout.splitlines()
    assert "  PodGroups: ml/running Running, ml/train Inqueue" in run.stdout.splitlines()
    assert "node n2 is not in the blue pool" in run.stdout
    moved = simulate(str(CASE), "--against", str(CURRENT), "--policies", str(CANDIDATE))
    assert moved.returncode == 1 and "ml/train-worker-0  n1 -> n2" in moved.stdout


@pytest.mark.slow
@pytest.mark.timeout(1800)  # the first build of the v1.10.0 engine compiles Volcano
def test_a_recording_of_volcano_v1_10_whose_podgroups_carry_go_field_names_rebuilds_too(tmp_path):
    from policy_extender.fixture_runner.engine import simulate as run_engine
    run_engine("v1.10.0", str(CASE), str(CURRENT), serve_args=["--record", str(tmp_path / "rec")])
    run = simulate("--volcano", "v1.10.0", "--recording", str(tmp_path / "rec"), "--against", str(CURRENT),
                   "--policies", str(CANDIDATE), "--json")
    assert run.returncode == 1, run.stdout + run.stderr
    (cycle,) = json.loads(run.stdout)["cycles"]
    # "Spec": {"MinMember": 1, ...}, the metadata inline: read as the PodGroup it is (v1.10 calls
    # a PodGroup with its pods bound Running after allocate)
    assert cycle["current"]["phases"] == {"ml/running": "Running", "ml/train": "Running"}
    assert [(c["kind"], c["subject"], c["before"], c["after"]) for c in cycle["changes"]] == [
        ("bind", "ml/train-worker-0", "n1", "n2")]


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_the_documented_what_if_case_runs_its_cycles_as_the_docs_show():
    """tests/commands/simulate/what-if.yaml is the example of docs/testing-policies.md, word for word."""
    doc = (Path(__file__).resolve().parents[2] / "docs" / "testing-policies.md").read_text()
    case = HERE / "what-if.yaml"
    assert case.read_text() in doc
    run = simulate(str(case), "--policies", str(Path(__file__).resolve().parents[2] / "policies"))
    assert run.returncode == 0, run.stdout + run.stderr
    cycles = run.stdout.split("\ncycle ")[1:]
    assert "  bound ml/first-worker-0 -> n1" in cycles[0]
    assert "nothing bound, evicted or pipelined" in cycles[1]     # first runs, second waits
    assert "  bound ml/second-worker-0 -> n1" in cycles[2]        # first succeeded: room


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_a_case_with_an_outcome_cases_name_and_expect_runs_its_cluster(tmp_path):
    """simulate reads an outcome case's keys; its name and expect (policy-extender test's) are
    not compared here."""
    case = tmp_path / "case.yaml"
    case.write_text("name: train lands in the blue pool\n" + CASE.read_text()
                    + "expect: {never_evicted: [ml/running-worker-0], bound_by: {ml/train-worker-0: 1}}\n")
    run = simulate(str(case), "--policies", str(CURRENT))
    assert run.returncode == 0, run.stdout + run.stderr
    assert "  bound ml/train-worker-0 -> n1" in run.stdout.splitlines()


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_values_make_the_directory_and_the_file_one_set_as_serve_loads_them():
    """--values: the pooled set sends new work to the blue pool by default, to the green one with
    the green cluster's values file (policyset.sets.policy_set_source)."""
    plain = simulate(str(CASE), "--policies", str(HERE / "pooled"))
    assert plain.returncode == 0 and "  bound ml/train-worker-0 -> n1" in plain.stdout.splitlines(), plain.stderr
    green = simulate(str(CASE), "--policies", str(HERE / "pooled"), "--values", str(HERE / "clusters" / "green-values.yaml"))
    assert green.returncode == 0, green.stdout + green.stderr
    assert "  bound ml/train-worker-0 -> n2" in green.stdout.splitlines()
    assert "node n1 is not in the green pool" in green.stdout
