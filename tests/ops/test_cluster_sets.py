"""One policy directory, one values file per cluster (issue 47 item 1): every command reads the set
as ``policyset.sets`` builds it, so the team checks, tests, evaluates and ships each cluster's set
from ``gpu-policies/`` + ``clusters/{dev,prod}-values.yaml`` with no symlink directory."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
import yaml

from policy_extender import cli
from policy_extender.commands.configmap import VERSION_ANNOTATION
from policy_extender.config import ConfigError, load
from policy_extender.policyset import compile_sources, load_set, policy_set_source
from policy_extender.policyset.files import ReadError
from policy_extender.policyset.reload import PolicyReloader
from policy_extender.wire import compact

POLICY = """\
param max_gpus: number = 8
filter gpu-cap: task.requests.gpu <= max_gpus
    reason "asks {task.requests.gpu} GPUs; this cluster allows {max_gpus} per task"
"""

CASES = """\
defaults:
  decision: filter
  input:
    task: {name: t0, requests: {gpu: 4}}
    node: {name: n1, allocatable: {gpu: 8}}
cases:
  - name: four GPUs are %s
    expect: {fits: %s}
"""


def team(tmp_path: Path) -> Path:
    """gpu-policies/ (the policy and one fixture file per cluster) and clusters/*-values.yaml."""
    (tmp_path / "gpu-policies").mkdir()
    (tmp_path / "clusters").mkdir()
    (tmp_path / "gpu-policies" / "gpu-cap.policy").write_text(POLICY)
    (tmp_path / "clusters" / "dev-values.yaml").write_text("gpu-cap.max_gpus: 2\n")
    (tmp_path / "clusters" / "prod-values.yaml").write_text("gpu-cap.max_gpus: 8\n")
    for cluster, fits in (("dev", "false"), ("prod", "true")):
        text = f"values: ../clusters/{cluster}-values.yaml\n" + CASES % (f"{'too many' if fits == 'false' else 'fine'} in {cluster}", fits)
        (tmp_path / "gpu-policies" / f"{cluster}.fixtures.yaml").write_text(text)
    return tmp_path


def main(capsys, *argv: str) -> tuple[int, str, str]:
    code = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_the_issue_scenario_checked_tested_and_shipped_per_cluster(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(team(tmp_path))
    code, out, err = main(capsys, "check", "gpu-policies", "--values", "clusters/dev-values.yaml",
                          "--values", "clusters/prod-values.yaml")
    assert code == 0, err
    dev = compile_sources({"gpu-cap.policy": POLICY, "dev-values.yaml": "gpu-cap.max_gpus: 2\n"}).version
    prod = compile_sources({"gpu-cap.policy": POLICY, "prod-values.yaml": "gpu-cap.max_gpus: 8\n"}).version
    assert f"gpu-policies with clusters/dev-values.yaml: version {dev}" in out
    assert f"gpu-policies with clusters/prod-values.yaml: version {prod}" in out

    code, out, err = main(capsys, "test", "gpu-policies")
    assert code == 0, out + err
    assert "PASS" in out and "four GPUs are too many in dev" in out and "four GPUs are fine in prod" in out

    for cluster, version in (("dev", dev), ("prod", prod)):
        code, out, err = main(capsys, "configmap", "gpu-policies", "--values", f"clusters/{cluster}-values.yaml")
        assert code == 0, err
        document = yaml.safe_load(out)
        assert sorted(document["data"]) == sorted(["gpu-cap.policy", f"{cluster}-values.yaml"])
        assert document["metadata"]["annotations"][VERSION_ANNOTATION] == version
        assert f"policy-extender configmap gpu-policies --values clusters/{cluster}-values.yaml" in out
        shipped = tmp_path / f"{cluster}-configmap.yaml"
        shipped.write_text(out)
        assert main(capsys, "configmap", "gpu-policies", "--values", f"clusters/{cluster}-values.yaml",
                    "--check", shipped)[0] == 0
        # what the kubelet mounts: the ConfigMap's keys as files, which serve loads as the same version
        mounted = tmp_path / f"mounted-{cluster}"
        mounted.mkdir()
        for key, text in document["data"].items():
            (mounted / key).write_text(text)
        assert PolicyReloader([str(mounted)], 0).reload_now().version == version

    code, out, err = main(capsys, "test", "gpu-policies", "--json")
    assert json.loads(out)["summary"]["passed"] == 2


def test_serve_loads_the_directory_with_its_values_file(tmp_path):
    team(tmp_path)
    config = load({"policy_dirs": str(tmp_path / "gpu-policies"), "values_file": str(tmp_path / "clusters" / "prod-values.yaml")})
    source = policy_set_source(config.policy_dirs, config.values_file)
    status = PolicyReloader(source.paths(), 0).reload_now()
    assert status.ready and status.files == ("gpu-cap.policy", "prod-values.yaml")
    assert status.version == load_set(source).version
    with pytest.raises(ConfigError, match="ends in values.yaml"):
        load({"values_file": str(tmp_path / "clusters" / "prod.yaml")})


def test_serve_check_takes_values(tmp_path, capsys):
    team(tmp_path)
    code, out, err = main(capsys, "serve", "--check", "--policy-dirs", tmp_path / "gpu-policies",
                          "--values", tmp_path / "clusters" / "dev-values.yaml")
    assert code == 0, err
    assert "with " + str(tmp_path / "clusters" / "dev-values.yaml") in err


def test_a_values_file_missing_is_not_ready_and_says_which(tmp_path):
    team(tmp_path)
    source = policy_set_source([tmp_path / "gpu-policies"], tmp_path / "clusters" / "qa-values.yaml")
    status = PolicyReloader(source.paths(), 0).reload_now()
    assert not status.ready
    assert "qa-values.yaml: the set's values file does not exist" in status.errors[0]


def test_a_values_file_must_be_named_as_one(tmp_path):
    team(tmp_path)
    with pytest.raises(ReadError, match=r"prod\.yaml: a values file's name ends in values\.yaml"):
        policy_set_source([tmp_path / "gpu-policies"], tmp_path / "prod.yaml")


def test_two_values_files_in_one_set_name_both(tmp_path, capsys):
    team(tmp_path)
    (tmp_path / "gpu-policies" / "values.yaml").write_text("gpu-cap.max_gpus: 4\n")
    code, out, err = main(capsys, "check", tmp_path / "gpu-policies", "--values", tmp_path / "clusters" / "dev-values.yaml")
    assert code == 1
    assert (f"error[E002]: the set holds 2 values files: {tmp_path / 'clusters' / 'dev-values.yaml'} and "
            f"{tmp_path / 'gpu-policies' / 'values.yaml'}") in err
    code, out, err = main(capsys, "configmap", tmp_path / "gpu-policies", "--values", tmp_path / "clusters" / "dev-values.yaml")
    assert code == 1 and "E002" in err and out == ""


def test_an_empty_values_file_is_a_warning(tmp_path, capsys):
    team(tmp_path)
    (tmp_path / "clusters" / "qa-values.yaml").write_text("# to be filled in\n")
    code, out, err = main(capsys, "check", tmp_path / "gpu-policies", "--values", tmp_path / "clusters" / "qa-values.yaml")
    assert code == 0
    assert "warning[W001]: the values file sets nothing" in err and "1 warning" in out
    assert main(capsys, "check", "--strict", tmp_path / "gpu-policies", "--values",
                tmp_path / "clusters" / "qa-values.yaml")[0] == 1


def test_eval_takes_the_values_file(tmp_path, capsys):
    team(tmp_path)
    body = compact.predicate_body({"name": "t0", "requests": {"gpu": 4}}, {"name": "n1", "allocatable": {"gpu": 8}})
    (tmp_path / "body.json").write_text(json.dumps(body))
    answers = {}
    for cluster in ("dev", "prod"):
        code, out, err = main(capsys, "eval", tmp_path / "body.json", "--verb", "predicate", "--json",
                              "--policies", tmp_path / "gpu-policies", "--values",
                              tmp_path / "clusters" / f"{cluster}-values.yaml")
        assert code == 0, err
        answers[cluster] = json.loads(out)
    assert "allows 2 per task" in json.dumps(answers["dev"])
    assert "allows" not in json.dumps(answers["prod"])


def test_a_case_names_its_own_values_or_none(tmp_path, capsys):
    team(tmp_path)
    (tmp_path / "gpu-policies" / "mixed.fixtures.yaml").write_text(textwrap.dedent("""\
        values: ../clusters/dev-values.yaml
        defaults:
          decision: filter
          input:
            task: {name: t0, requests: {gpu: 4}}
            node: {name: n1, allocatable: {gpu: 8}}
        cases:
          - name: the file's values (dev)
            expect: {fits: false}
          - name: the case's own values (prod)
            values: ../clusters/prod-values.yaml
            expect: {fits: true}
          - name: no values file, the default of 8
            values: null
            expect: {fits: true}
        """))
    code, out, err = main(capsys, "test", tmp_path / "gpu-policies" / "mixed.fixtures.yaml")
    assert code == 0, out + err
    assert out.count("PASS") == 3


def test_test_values_is_the_set_of_fixtures_that_name_none(tmp_path, capsys):
    team(tmp_path)
    for name in ("dev", "prod"):
        (tmp_path / "gpu-policies" / f"{name}.fixtures.yaml").unlink()
    (tmp_path / "gpu-policies" / "any.fixtures.yaml").write_text(CASES % ("too many", "false"))
    assert main(capsys, "test", tmp_path / "gpu-policies", "--values", tmp_path / "clusters" / "dev-values.yaml")[0] == 0
    assert main(capsys, "test", tmp_path / "gpu-policies", "--values", tmp_path / "clusters" / "prod-values.yaml")[0] == 1


def test_check_refuses_a_values_file_not_named_as_one(tmp_path, capsys):
    team(tmp_path)
    (tmp_path / "clusters" / "prod.yaml").write_text("gpu-cap.max_gpus: 8\n")
    code, out, err = main(capsys, "check", tmp_path / "gpu-policies", "--values", tmp_path / "clusters" / "prod.yaml")
    assert code == 1 and "prod.yaml: a values file's name ends in values.yaml" in err
    code, out, err = main(capsys, "check", tmp_path / "gpu-policies", "--values", tmp_path / "clusters" / "prod-values.yaml",
                          "--format", "json")
    assert json.loads(out)["sets"][0]["set"].endswith("gpu-policies with " + str(tmp_path / "clusters" / "prod-values.yaml"))


TEAM = Path(__file__).parent / "data" / "gpu-team"
SHIPPED_CONF = str(Path(__file__).parents[2] / "docker" / "k8s" / "sidecar" / "volcano-scheduler.conf")


def test_the_teams_five_policies_per_cluster_with_no_symlink(tmp_path, capsys, monkeypatch):
    """The issue's "done when": the platform team's five policies (pools, packing, an interactive
    gate on idle GPUs with a dev and a prod threshold, checkpoint protection, a per-cycle queue
    cap) as one directory and a values file per cluster: checked, tested, and shipped per cluster."""
    import shutil
    shutil.copytree(TEAM, tmp_path / "team")
    monkeypatch.chdir(tmp_path / "team")
    code, out, err = main(capsys, "check", "--strict", "gpu-policies", "--values", "clusters/dev-values.yaml",
                          "--values", "clusters/prod-values.yaml")
    assert code == 0, err
    code, out, err = main(capsys, "test", "gpu-policies", "--fail-under", "100")
    assert code == 0, out + err
    assert out.count("PASS") == 9 and "two idle GPUs are enough in dev" in out and "not enough in prod" in out
    versions = {}
    for cluster in ("dev", "prod"):
        code, out, err = main(capsys, "configmap", "gpu-policies", "--values", f"clusters/{cluster}-values.yaml")
        assert code == 0, err
        document = yaml.safe_load(out)
        assert f"{cluster}-values.yaml" in document["data"] and len(document["data"]) == 6
        versions[cluster] = document["metadata"]["annotations"][VERSION_ANNOTATION]
        code, conf, err = main(capsys, "volcano-conf", SHIPPED_CONF, "--replace", "--policies", "gpu-policies", "--values", f"clusters/{cluster}-values.yaml")
        assert code == 0, err
        assert "extender.predicateVerb: predicate" in conf and "extender.queueOverusedVerb" not in conf
        assert "extender.jobEnqueueableVerb: jobEnqueueable" in conf and "extender.preemptableVerb" in conf
    assert versions["dev"] != versions["prod"]
    # the prod expectations do not hold with dev's values: the values file is what is tested
    prod = (tmp_path / "team" / "gpu-policies" / "prod.fixtures.yaml").read_text()
    (tmp_path / "team" / "gpu-policies" / "prod.fixtures.yaml").write_text(prod.replace("values: ../clusters/prod-values.yaml\n", ""))
    assert main(capsys, "test", "gpu-policies/prod.fixtures.yaml", "--values", "clusters/prod-values.yaml")[0] == 0
    code, out, _ = main(capsys, "test", "gpu-policies/prod.fixtures.yaml", "--values", "clusters/dev-values.yaml")
    assert code == 1 and "FAIL" in out
