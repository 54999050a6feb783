"""Fixtures that cannot pass for the wrong reason (issue 47 item 6): an unknown compact key or
resource is an ERROR with did-you-mean, one policy error is shown once, ``--junit`` into a missing
directory creates it, a case unsets a file-level default with ``null``, ``test --watch`` runs again
on a real save."""

from __future__ import annotations

import io
import textwrap
import threading
import time
import xml.etree.ElementTree as ET

from policy_extender import cli
from policy_extender.fixture_runner import watch as watching
from policy_extender.fixture_runner.runner import run_paths

POLICY = "filter gpus: node.idle.gpu >= task.requests.gpu\n    reason \"too few idle GPUs\"\n"


def write(tmp_path, fixtures: str, policy: str = POLICY):
    directory = tmp_path / "p"
    directory.mkdir(exist_ok=True)
    (directory / "gpus.policy").write_text(policy)
    (directory / "gpus.fixtures.yaml").write_text(textwrap.dedent(fixtures))
    return directory


def results(directory):
    return [(r.case.name, r.outcome, r.message) for r in run_paths([directory]).results]


def test_a_misspelled_resource_is_an_error_with_did_you_mean(tmp_path):
    directory = write(tmp_path, """\
        defaults: {decision: filter}
        cases:
          - name: idle written gpus
            input:
              task: {name: t, requests: {gpu: 1}}
              node: {name: n, allocatable: {gpu: 4}, idle: {gpus: 1}}
            expect: {fits: false}
        """)
    [(name, outcome, message)] = results(directory)
    assert outcome == "ERROR"
    assert "node.idle.gpus: unknown resource 'gpus' (did you mean 'gpu'?)" in message
    assert "gpus.fixtures.yaml:6" in message


def test_an_extended_resource_by_its_full_name_is_kept(tmp_path):
    directory = write(tmp_path, """\
        defaults: {decision: filter}
        cases:
          - name: an fpga is no GPU
            input:
              task: {name: t, requests: {gpu: 1, example.com/fpga: 1}}
              node: {name: n, allocatable: {gpu: 4, example.com/fpga: 1, hugepages-2Mi: 1Gi}}
            expect: {fits: true}
        """)
    assert [o for _, o, _ in results(directory)] == ["PASS"]


def test_an_unknown_compact_key_says_which_was_meant(tmp_path):
    directory = write(tmp_path, """\
        defaults: {decision: filter}
        cases:
          - name: allocatble
            input:
              task: {name: t}
              node: {name: n, allocatble: {gpu: 4}}
            expect: {fits: true}
        """)
    [(_, outcome, message)] = results(directory)
    assert outcome == "ERROR" and "unknown key 'allocatble'" in message and "(did you mean 'allocatable'?)" in message


def test_a_policy_error_is_shown_once_not_under_every_case(tmp_path, capsys):
    cases = "".join(f"""
          - name: case {i}
            input: {{task: {{name: t}}, node: {{name: n}}}}
            expect: {{fits: true}}""" for i in range(5))
    directory = write(tmp_path, "defaults: {decision: filter}\ncases:" + cases + "\n",
                      policy="filter gpus: node.idle.gpuu >= 1\n")
    assert cli.main(["test", str(directory)]) == 1
    out = capsys.readouterr().out
    assert out.count("error[E201]: unknown field 'gpuu'") == 1
    assert out.count("ERROR") == 5
    assert out.count("the errors are shown once, under the first case of this set") == 4


def test_junit_into_a_missing_directory_creates_it(tmp_path, capsys):
    directory = write(tmp_path, """\
        cases:
          - name: fits
            decision: filter
            input: {task: {name: t}, node: {name: n}}
            expect: {fits: true}
        """)
    report = tmp_path / "out" / "reports" / "junit.xml"
    assert cli.main(["test", str(directory), "--junit", str(report)]) == 0
    assert ET.parse(report).getroot().find(".//testcase").get("name") == "fits"


def test_a_case_unsets_a_default_with_null(tmp_path):
    directory = write(tmp_path, """\
        defaults:
          decision: filter
          input:
            task: {name: t, requests: {gpu: 2}}
            node: {name: n, allocatable: {gpu: 1}}
          expect: {fits: false, rule: gpus}
        cases:
          - name: the default expectation
          - name: rule unset, fits true
            input:
              task: {name: t, requests: {gpu: 1}}
            expect: {fits: true, rule: null}
        """)
    assert [(n, o) for n, o, _ in results(directory)] == [("the default expectation", "PASS"),
                                                          ("rule unset, fits true", "PASS")]


def test_watch_runs_again_when_a_file_is_saved(tmp_path):
    directory = write(tmp_path, """\
        cases:
          - name: fits
            decision: filter
            input: {task: {name: t, requests: {gpu: 1}}, node: {name: n, allocatable: {gpu: 1}}}
            expect: {fits: true}
        """)
    outcomes: list[list[str]] = []
    stop, out = threading.Event(), io.StringIO()
    thread = threading.Thread(target=watching.watch, args=([directory], lambda: outcomes.append(
        [r.outcome for r in run_paths([directory]).results])), kwargs={"interval": 0.05, "stop": stop, "out": out})
    thread.start()
    try:
        _wait(lambda: len(outcomes) == 1)
        time.sleep(0.05)
        policy = directory / "gpus.policy"
        policy.write_text(POLICY.replace(">=", ">"))  # a real save: now 1 > 1 rejects
        _wait(lambda: len(outcomes) == 2)
        assert outcomes == [["PASS"], ["FAIL"]]
        (directory / "gpus.policy").write_text(POLICY)
        _wait(lambda: len(outcomes) == 3)
        assert outcomes[2] == ["PASS"]
    finally:
        stop.set()
        thread.join(5)
    assert "changed, running again" in out.getvalue()


def _wait(condition, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "the watcher did not run again in time"
        time.sleep(0.02)


COVERED = """\
filter gpu-only: node.labels.pool == "gpu" or task.requests.gpu == 0
    when task.annotations.team == "ml"
score spread: node.idle.cpu
    when task.requests.cpu > 0 and task.requests.gpu == 0
"""


def coverage_of(tmp_path, cases: str) -> dict:
    directory = write(tmp_path, "cases:\n" + textwrap.dedent(cases), policy=COVERED)
    run = run_paths([directory])
    assert [r.outcome for r in run.results] == ["PASS"] * len(run.results), [r.message for r in run.results]
    return run.coverage.report()


def test_a_filter_whose_when_never_held_is_not_exercised(tmp_path):
    report = coverage_of(tmp_path, """\
        - name: no team, fits
          decision: filter
          input: {task: {name: t, requests: {gpu: 1}}, node: {name: n}}
          expect: {fits: true}
        """)
    assert [r["rule"] for r in report["never_exercised"]] == ["gpu-only", "spread"]
    assert [r["rule"] for r in report["guards_never_held"]] == ["gpu-only", "spread"]


def test_each_operand_of_and_or_is_covered_when_both_true_and_false(tmp_path):
    cases = """\
        - name: ml task on a gpu node
          decision: filter
          input: {task: {name: t, annotations: {team: ml}, requests: {gpu: 1}}, node: {name: n, labels: {pool: gpu}}}
          expect: {fits: true}
        - name: spread a cpu task
          decision: score
          input: {task: {name: t, requests: {cpu: 1}}, nodes: [{name: n, allocatable: {cpu: 4}}]}
          expect: {order: [n]}
        """
    report = coverage_of(tmp_path, cases)
    assert report["exercised"] == 2 and report["guards_never_held"] == []
    missing = {(b["expression"], b["missing"]) for b in report["branches"]["not_covered"]}
    assert missing == {('node.labels.pool == "gpu"', "never false"), ("task.requests.gpu == 0", "never evaluated"),
                       ("task.requests.cpu > 0", "never false")} | {("task.requests.gpu == 0", "never false")}
    more = cases.rstrip(" ") + """\
        - name: ml cpu task off the gpu pool
          decision: filter
          input: {task: {name: t, annotations: {team: ml}}, node: {name: n, labels: {pool: cpu}}}
          expect: {fits: true}
        - name: ml gpu task off the gpu pool
          decision: filter
          input: {task: {name: t, annotations: {team: ml}, requests: {gpu: 1}}, node: {name: n, labels: {pool: cpu}}}
          expect: {fits: false, rule: gpu-only}
        - name: a gpu task is not spread
          decision: score
          input: {task: {name: t, requests: {cpu: 1, gpu: 1}}, nodes: [{name: n, allocatable: {cpu: 4}}]}
          expect: {order: [n]}
        - name: a task without cpu is not spread
          decision: score
          input: {task: {name: t}, nodes: [{name: n, allocatable: {cpu: 4}}]}
          expect: {order: [n]}
        """
    branches = coverage_of(tmp_path, more)["branches"]
    assert branches["not_covered"] == [] and branches["covered"] == branches["operands"] == 4
