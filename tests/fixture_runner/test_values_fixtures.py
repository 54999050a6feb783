"""Fixtures of a directory with a values file: the set they test is the one serve loads, values
included, so a value changes the expected answers (docs/testing-policies.md, "Fixtures with
values")."""

import shutil
import textwrap

from policy_extender.fixture_runner.runner import run_paths

from tests.support.fixture_dirs import REPO

#: A task asking for 1 core and 1 GPU; "cpu-busy" is fuller in cpu, "gpu-busy" in GPUs, so the
#: library binpack's GPU weight decides which one it packs first.
#:   GPU weight 2 (the file's default): cpu-busy (0.875 + 2 * 0.125) / 3 = 0.375,
#:                                      gpu-busy (0.125 + 2 * 0.875) / 3 = 0.625
#:   GPU weight 0 (Volcano's default, set in values.yaml): cpu-busy 0.875, gpu-busy 0.125
FIXTURES = """\
    defaults:
      decision: score
      input:
        task: {name: t, requests: {cpu: 1, gpu: 1}}
        nodes:
          - {name: cpu-busy, allocatable: {cpu: 8, gpu: 8}, used: {cpu: 6}}
          - {name: gpu-busy, allocatable: {cpu: 8, gpu: 8}, used: {gpu: 6}}
    cases:
      - name: %s
        expect:
          scores: %s
          order: %s
"""


def write(tmp_path, values, name, scores, order):
    directory = tmp_path / "policies"
    directory.mkdir(exist_ok=True)
    shutil.copy(REPO / "policies" / "library" / "binpack.policy", directory)
    if values is not None:
        (directory / "values.yaml").write_text(values)
    (directory / "binpack.fixtures.yaml").write_text(textwrap.dedent(FIXTURES % (name, scores, order)))
    return directory


def outcomes(run):
    return [(r.case.name, r.outcome, r.message) for r in run.results]


def test_the_library_default_packs_gpus_first(tmp_path):
    directory = write(tmp_path, None, "gpu weight 2", "{cpu-busy: 37.5, gpu-busy: 62.5}", "[gpu-busy, cpu-busy]")
    assert outcomes(run_paths([directory])) == [("gpu weight 2", "PASS", "")]


def test_a_value_in_values_yaml_changes_the_expected_order(tmp_path):
    values = "binpack.resources.nvidia.com/gpu: 0  # Volcano's default: GPUs left out\n"
    directory = write(tmp_path, values, "gpu weight 0", "{cpu-busy: 87.5, gpu-busy: 12.5}", "[cpu-busy, gpu-busy]")
    assert outcomes(run_paths([directory])) == [("gpu weight 0", "PASS", "")]
    write(tmp_path, values, "the default's order", "{cpu-busy: 37.5, gpu-busy: 62.5}", "[gpu-busy, cpu-busy]")
    [result] = run_paths([directory]).results
    assert result.outcome == "FAIL"


def test_a_wrong_value_makes_the_cases_errors_pointing_at_both_files(tmp_path):
    values = "binpack:\n  resources:\n    nvidia.com/gpu: two\n"
    directory = write(tmp_path, values, "any", "{cpu-busy: 0}", "[cpu-busy]")
    [result] = run_paths([directory]).results
    assert result.outcome == "ERROR"
    assert ("values.yaml:3:21: error[E310]: 'binpack.resources.nvidia.com/gpu' is a number "
            "(declared at binpack.policy:") in result.message


def test_a_policies_list_tests_with_the_values_file_only_when_it_names_it(tmp_path):
    values = "binpack.resources.nvidia.com/gpu: 0\n"
    directory = write(tmp_path, values, "named", "{cpu-busy: 87.5, gpu-busy: 12.5}", "[cpu-busy, gpu-busy]")
    fixtures = directory / "binpack.fixtures.yaml"
    fixtures.write_text("policies: [binpack.policy, values.yaml]\n" + fixtures.read_text())
    (directory / "defaults.fixtures.yaml").write_text("policies: [binpack.policy]\n" + textwrap.dedent(
        FIXTURES % ("not named", "{cpu-busy: 37.5, gpu-busy: 62.5}", "[gpu-busy, cpu-busy]")))
    assert sorted(outcomes(run_paths([directory]))) == [("named", "PASS", ""), ("not named", "PASS", "")]
