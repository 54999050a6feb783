"""The scheduler confs derived from the set (issue 47 item 2): ``volcano-conf --policies`` registers
only the verbs the rules serve, ``managedResources`` when every task-scoped rule is guarded by a
resource request, an error when a rule kind's verb is left out; ``kube-scheduler-conf --merge
--replace`` puts its entry in place of the one at its URL."""

from __future__ import annotations

import pytest
import yaml

from policy_extender import cli
from policy_extender.commands import kube_scheduler_conf as ksc
from policy_extender.commands import volcano_conf
from policy_extender.decide.served import served
from policy_extender.policyset import compile_sources
from policy_extender.verb_names.volcano import VERB_KINDS
from tests.commands.test_kube_scheduler_conf import ENTRY, FILTER, WITH_EXTENDERS, strictly_loaded

CONF = """\
actions: "enqueue, allocate, preempt, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
- plugins:
  - name: predicates
"""

SESSION = ["onSessionOpen", "onSessionClose", "jobEnqueued", "allocateFunc", "deallocateFunc"]


def verbs_of(sources: dict[str, str]) -> list[str]:
    return sorted(served(compile_sources(sources)).verbs)


def test_only_the_verbs_the_rules_serve_and_the_session_verbs():
    assert verbs_of({"a.policy": "score s: node.idle.gpu\n"}) == sorted(["prioritize", *SESSION])
    assert verbs_of({"a.policy": "filter f: node.idle.gpu > 0\n"}) == sorted(["predicate", *SESSION])
    assert verbs_of({"a.policy": "victim v: evictee.priority < evictor.priority\n"}) == sorted(
        ["preemptable", "reclaimable", *SESSION])
    assert verbs_of({"a.policy": "ready r: job.ready_tasks >= job.min_available\n"}) == sorted(["jobReady", *SESSION])
    audit_only = {"a.policy": "audit\nfilter f: node.idle.gpu > 0\n"}
    assert "predicate" in verbs_of(audit_only)  # a shadow rule is evaluated on its verb's calls too
    kube_only = {"a.policy": "protocol kube-scheduler\nfilter f: node.allocatable.gpu > 0\n"}
    assert verbs_of(kube_only) == []


@pytest.mark.parametrize("guard, managed", [
    ("when task.requests.gpu > 0", ("nvidia.com/gpu",)),
    ("when task.requests.gpu >= 1 and task.annotations.x == \"y\"", ("nvidia.com/gpu",)),
    ("when task.requests[\"example.com/fpga\"] != 0", ("example.com/fpga",)),
    ("when task.requests.gpu >= 0", ()),          # holds for a task without GPUs
    ("when task.requests.cpu > 0", ()),           # not an extended resource
    ("when task.requests.gpu > 0 or true", ()),   # not a conjunct
    ("", ()),
])
def test_managed_resources_only_when_every_task_rule_is_guarded(guard, managed):
    policy = f"{guard}\nfilter f: node.idle.gpu >= task.requests.gpu\nscore s: node.idle.gpu\n"
    enqueue = {"b.policy": "enqueue e: job.min_available < 100\n"}  # job-scoped: no guard needed
    assert served(compile_sources({"a.policy": policy, **enqueue})).managed == managed


def test_no_managed_resources_when_a_rule_reads_this_cycles_events():
    policy = "when task.requests.gpu > 0\nfilter f: session.node.gpu < 4\n"
    found = served(compile_sources({"a.policy": policy}))
    assert found.managed == () and "reads session" in found.why_not_managed


def run(capsys, tmp_path, sources: dict[str, str], *options: str) -> tuple[int, dict | None, str]:
    directory = tmp_path / "p"
    directory.mkdir(exist_ok=True)
    for name, text in sources.items():
        (directory / name).write_text(text)
    (tmp_path / "conf.yaml").write_text(CONF)
    code = cli.main(["volcano-conf", str(tmp_path / "conf.yaml"), "--policies", str(directory), *options])
    out, err = capsys.readouterr()
    if code:
        return code, None, err
    [plugin] = [p for tier in yaml.safe_load(out)["tiers"] for p in tier["plugins"] if p["name"] == "extender"]
    return code, plugin["arguments"], err


def test_volcano_conf_derives_verbs_and_managed_resources(tmp_path, capsys):
    policy = "when task.requests.gpu > 0\nscore most-idle: node.idle.gpu\n"
    code, arguments, err = run(capsys, tmp_path, {"a.policy": policy})
    assert code == 0, err
    registered = sorted(k.removeprefix("extender.").removesuffix("Verb") for k in arguments if k.endswith("Verb"))
    assert registered == sorted(["prioritize", *SESSION])
    assert arguments["extender.managedResources"] == ["nvidia.com/gpu"]
    assert "predicate, preemptable, reclaimable, queueOverused, jobEnqueueable, jobReady left out" in err


def test_ready_rules_register_job_ready(tmp_path, capsys):
    code, arguments, err = run(capsys, tmp_path, {"a.policy": "ready r: job.ready_tasks >= job.min_available\n"})
    assert code == 0 and arguments["extender.jobReadyVerb"] == "jobReady"
    assert "jobReady registered for the set's ready rules" in err


def test_omitting_a_verb_a_rule_kind_needs_is_an_error(tmp_path, capsys):
    code, _, err = run(capsys, tmp_path, {"a.policy": "filter f: node.idle.gpu > 0\n"}, "--omit-verb", "predicate")
    assert code == 2
    assert "--omit-verb predicate: the set's filter rules are served by predicate, so Volcano would never call them" in err


def test_a_set_with_nothing_for_volcano_is_refused(tmp_path, capsys):
    code, _, err = run(capsys, tmp_path, {"a.policy": "protocol kube-scheduler\nfilter f: node.allocatable.gpu > 0\n"})
    assert code == 2 and "no rule for Volcano" in err


def test_volcano_conf_takes_the_values_file(tmp_path, capsys):
    policy = "param cap: number = 1\nfilter f: task.requests.gpu <= cap\n"
    (tmp_path / "dev-values.yaml").write_text("a.nope: 2\n")
    code, _, err = run(capsys, tmp_path, {"a.policy": policy}, "--values", str(tmp_path / "dev-values.yaml"))
    assert code == 2 and "E207" in err  # the values file is read with the set


def test_without_policies_every_verb_but_job_ready_as_before(tmp_path, capsys):
    (tmp_path / "conf.yaml").write_text(CONF)
    assert cli.main(["volcano-conf", str(tmp_path / "conf.yaml")]) == 0
    text = capsys.readouterr().out
    assert all(f"extender.{v}Verb" in text for v in VERB_KINDS if v != "jobReady")


def test_derived_extender_is_one_function_of_the_set():
    policy_set = compile_sources({"a.policy": "score s: node.idle.gpu\n"})
    omitted, managed, notes = volcano_conf.derived_extender(policy_set)
    assert "predicate" in omitted and "prioritize" not in omitted and managed == []


def test_kube_scheduler_merge_replace_puts_the_entry_in_place():
    text = WITH_EXTENDERS.replace("http://gpu-extender:8888/", "http://pe:8713/kube-scheduler/")
    with pytest.raises(ksc.KubeSchedulerConfError, match="pass --replace"):
        ksc.merge(text, ENTRY)
    result = ksc.merge(text, ENTRY, replace=True)
    config = yaml.safe_load(result.text)
    assert config["extenders"] == [ENTRY]
    assert config["profiles"] == [{"schedulerName": "default-scheduler"}]
    assert "# the GPU team's extender" in result.text and result.notes == []
    strictly_loaded(result.text)
    again = ksc.merge(result.text, ENTRY, replace=True)  # idempotent: the comment it wrote is replaced too
    assert again.text == result.text


def test_kube_scheduler_replace_keeps_the_other_extenders():
    first = ksc.merge(WITH_EXTENDERS, ENTRY).text
    entry = ksc.extender_entry("http://pe:8713/kube-scheduler", {FILTER: "filter"})
    config = yaml.safe_load(ksc.merge(first, entry, replace=True).text)
    assert [e["urlPrefix"] for e in config["extenders"]] == ["http://gpu-extender:8888/", "http://pe:8713/kube-scheduler"]
    assert config["extenders"][1] == entry


def test_kube_scheduler_conf_reads_the_set_with_its_values_file(tmp_path):
    directory = tmp_path / "p"
    directory.mkdir()
    (directory / "a.policy").write_text("protocol kube-scheduler\nparam cap: number = 1\n"
                                        "filter f: node.allocatable.gpu >= cap\n")
    (tmp_path / "prod-values.yaml").write_text("a.cap: 2\n")
    assert ksc.served_rule_kinds([directory], str(tmp_path / "prod-values.yaml")) == frozenset({"filter"})
    (tmp_path / "bad-values.yaml").write_text("a.nope: 2\n")
    with pytest.raises(ksc.KubeSchedulerConfError, match="E207"):
        ksc.served_rule_kinds([directory], str(tmp_path / "bad-values.yaml"))
