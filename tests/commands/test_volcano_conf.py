"""``policy-extender volcano-conf``: the user's scheduler conf with the extender added, the rest kept.

The confs below are written for these tests after Volcano's own (installer/helm/chart/volcano/
config/volcano-scheduler.conf and volcano-scheduler-ci.conf at volcano-sh/volcano HEAD, and the
ConfigMap of installer/volcano-development.yaml as ``kubectl get -o yaml`` prints it), plus confs
with custom tiers, plugin arguments and comments.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from policy_extender.commands import volcano_conf
from tests.ops.test_manifests import CONFS, EXTENDER_ARGUMENTS, UNREGISTERED, extender_arguments

ROOT = Path(__file__).resolve().parents[2]

VOLCANO_DEFAULT = """\
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
    enablePreemptable: false
  - name: conformance
- plugins:
  - name: overcommit
  - name: drf
    enablePreemptable: false
  - name: predicates
  - name: proportion
  - name: nodeorder
  - name: binpack
"""

VOLCANO_CI = """\
actions: "enqueue, allocate, backfill, reclaim, preempt"
tiers:
- plugins:
  - name: priority
  - name: gang
    enablePreemptable: false
  - name: conformance
  - name: sla
- plugins:
  - name: overcommit
  - name: drf
    enablePreemptable: false
  - name: predicates
    arguments:
      predicate.DynamicResourceAllocationEnable: true
  - name: proportion
  - name: nodeorder
  - name: binpack
  - name: network-topology-aware
"""

#: custom tiers, indentation and arguments, comments everywhere, the anchor in the second tier
CUSTOM = """\
# Our scheduler: tuned by the platform team. Keep this header.
actions: "enqueue, allocate, preempt, reclaim, backfill"   # preempt for the research queue
tiers:
  # tier 1: hard guarantees
  -   plugins:
        -   name: sla
            arguments:
              sla-waiting-time: 1h2m3s
        -   name: tdm
            arguments:
              tdm.revocable-zone.rz1: 10:00-21:00
  # tier 2: job ordering
  -   plugins:
        -   name: priority
        -   name: gang
            enablePreemptable: false
            enableJobStarving: true
        -   name: conformance   # keeps kube-system pods
        # tier 2 ends here
  -   plugins:
        -   name: drf
        -   name: predicates
            arguments:
              predicate.GPUSharingEnable: true
              predicate.resources: nvidia.com/gpu
        -   name: nodeorder
            arguments:
              nodeaffinity.weight: 2
              podaffinity.weight: 2
configurations:
- name: enqueue
  arguments:
    overcommit-factor: 1.5
metrics:
  type: prometheus
  address: http://prometheus.monitoring.svc:9090
"""

CONFIGMAP = """\
apiVersion: v1
data:
  volcano-scheduler.conf: |
    actions: "enqueue, allocate, backfill"
    tiers:
    - plugins:
      - name: priority
      - name: gang
        enablePreemptable: false
      - name: conformance
    - plugins:
      - name: overcommit
      - name: drf
        enablePreemptable: false
      - name: predicates
      - name: proportion
      - name: nodeorder
      - name: binpack
kind: ConfigMap
metadata:
  annotations:
    meta.helm.sh/release-name: volcano  # installed by helm
    meta.helm.sh/release-namespace: volcano-system
  creationTimestamp: "2026-11-01T10:00:00Z"
  labels:
    app.kubernetes.io/managed-by: Helm
  name: volcano-scheduler-configmap
  namespace: volcano-system
  resourceVersion: "1234"
  uid: 6f0e1f4c-0000-4000-8000-000000000001
"""


def merged(text: str, replace: bool = False, **options) -> volcano_conf.Merged:
    return volcano_conf.merge(text, volcano_conf.extender_plugin(**options), replace=replace)


def plugin_names(conf: dict) -> list[list[str]]:
    return [[p["name"] for p in tier["plugins"]] for tier in conf["tiers"]]


def without_block(out: str) -> str:
    """``out`` without the lines the command inserted (the extender item)."""
    lines = out.splitlines(keepends=True)
    (start,) = [n for n, line in enumerate(lines) if re.fullmatch(r"-\s+name: extender", line.strip())]
    dash = len(lines[start]) - len(lines[start].lstrip())
    end = start + 1
    while end < len(lines) and (len(lines[end]) - len(lines[end].lstrip())) > dash:
        end += 1
    return "".join(lines[:start] + lines[end:])


def volcano_cli(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "policy_extender", "volcano-conf", *args], input=stdin,
                          capture_output=True, text=True, cwd=ROOT, timeout=60)


# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("text", [VOLCANO_DEFAULT, VOLCANO_CI], ids=["default", "ci"])
def test_volcanos_confs_get_the_extender_last_in_the_tier_of_priority(text):
    result = merged(text)
    conf = yaml.safe_load(result.text)
    before = plugin_names(yaml.safe_load(text))
    assert plugin_names(conf) == [before[0] + ["extender"], before[1]]
    assert without_block(result.text) == text  # every other byte kept


def test_the_arguments_are_those_of_the_shipped_sidecar_conf():
    conf = yaml.safe_load(merged(VOLCANO_DEFAULT).text)
    (plugin,) = [p for tier in conf["tiers"] for p in tier["plugins"] if p["name"] == "extender"]
    assert set(plugin["arguments"]) == EXTENDER_ARGUMENTS - UNREGISTERED
    assert plugin["arguments"] == extender_arguments(CONFS["sidecar"])


def test_include_verb_adds_what_the_shipped_conf_leaves_out():
    conf = yaml.safe_load(merged(VOLCANO_DEFAULT, omit_verbs=()).text)
    (plugin,) = [p for tier in conf["tiers"] for p in tier["plugins"] if p["name"] == "extender"]
    assert set(plugin["arguments"]) == EXTENDER_ARGUMENTS


def test_options_set_url_timeout_ignorable_resources_and_omitted_verbs():
    conf = yaml.safe_load(merged(VOLCANO_DEFAULT, url_prefix="http://policy-extender.volcano-system.svc:8713",
                                 http_timeout="1.5s", ignorable=False, managed_resources=["nvidia.com/gpu"],
                                 omit_verbs=["jobReady"]).text)
    (plugin,) = [p for p in conf["tiers"][0]["plugins"] if p["name"] == "extender"]
    arguments = plugin["arguments"]
    assert arguments["extender.urlPrefix"] == "http://policy-extender.volcano-system.svc:8713"
    assert arguments["extender.httpTimeout"] == "1.5s"
    assert arguments["extender.ignorable"] is False
    assert arguments["extender.managedResources"] == ["nvidia.com/gpu"]
    assert set(arguments) == EXTENDER_ARGUMENTS - {"extender.jobReadyVerb"}


def test_custom_tiers_arguments_and_comments_are_kept():
    result = merged(CUSTOM)
    conf, before = yaml.safe_load(result.text), yaml.safe_load(CUSTOM)
    names = plugin_names(before)
    assert plugin_names(conf) == [names[0], names[1] + ["extender"], names[2]]
    assert without_block(result.text) == CUSTOM  # comments, indentation, other keys untouched
    inserted = result.text.splitlines()[result.text.splitlines().index("        -   name: extender")]
    assert inserted == "        -   name: extender"  # laid out like its neighbours
    assert {k: v for k, v in conf.items() if k != "tiers"} == {k: v for k, v in before.items() if k != "tiers"}
    assert result.notes == []  # preempt and reclaim are there


def test_the_placement_rule_is_one_function():
    assert volcano_conf.placement([["sla"], ["priority", "gang"], ["drf"]]).tier == 1
    assert volcano_conf.placement([["gang"], ["drf", "conformance"]]).tier == 1
    fallback = volcano_conf.placement([["drf"], ["predicates"]])
    assert fallback.tier == 0 and fallback.note


def test_a_conf_without_the_anchor_plugins_gets_it_in_the_first_tier_with_a_note():
    text = "actions: \"enqueue, allocate\"\ntiers:\n- plugins:\n  - name: drf\n- plugins:\n  - name: predicates\n"
    result = merged(text)
    assert plugin_names(yaml.safe_load(result.text)) == [["drf", "extender"], ["predicates"]]
    assert any("no tier holds priority or conformance" in note for note in result.notes)
    assert any("preempt" in note and "left as it is" in note for note in result.notes)


def test_a_conf_with_an_extender_is_refused_with_where_and_how():
    text = CONFS["sidecar"].read_text()
    with pytest.raises(volcano_conf.ConfError) as error:
        merged(text)
    message = str(error.value)
    assert "already has an extender plugin (tier 1)" in message and "--replace" in message
    (line,) = [n for n, row in enumerate(text.splitlines(), 1) if row.strip() == "- name: extender"]
    column = text.splitlines()[line - 1].index("name") + 1
    assert message.startswith(f"CONF:{line}:{column}:")


def test_replace_moves_the_shipped_extender_and_keeps_the_rest():
    text = CONFS["sidecar"].read_text()
    result = merged(text, replace=True, url_prefix="http://10.0.0.1:8713")
    conf = yaml.safe_load(result.text)
    assert plugin_names(conf) == [["priority", "gang", "conformance", "extender"],
                                  ["overcommit", "drf", "predicates", "proportion", "nodeorder", "binpack"]]
    assert conf["tiers"][0]["plugins"][-1]["arguments"]["extender.urlPrefix"] == "http://10.0.0.1:8713"
    header = text.split("actions:")[0]
    assert result.text.startswith(header)  # the file's comments before the tiers are kept
    assert result.text.count("extender.urlPrefix") == 1


def test_replace_drops_a_tier_left_empty():
    text = VOLCANO_DEFAULT + "- plugins:\n  - name: extender\n    arguments:\n      extender.urlPrefix: http://old:1\n"
    result = merged(text, replace=True)
    assert plugin_names(yaml.safe_load(result.text))[-1] != []
    assert len(yaml.safe_load(result.text)["tiers"]) == 2
    assert "http://old:1" not in result.text


def test_a_flow_list_of_plugins_is_reserialised_and_says_it_lost_comments():
    text = "# lost\nactions: \"enqueue, allocate\"\ntiers:\n- plugins: [{name: priority}, {name: gang}]\n"
    result = merged(text)
    assert plugin_names(yaml.safe_load(result.text)) == [["priority", "gang", "extender"]]
    assert any("comments and layout are not" in note for note in result.notes)


def test_the_configmap_form_keeps_its_metadata_and_comments():
    result = merged(CONFIGMAP)
    out = yaml.safe_load(result.text)
    before = yaml.safe_load(CONFIGMAP)
    assert out["metadata"] == before["metadata"]
    assert "# installed by helm" in result.text
    inner = out["data"]["volcano-scheduler.conf"]
    assert plugin_names(yaml.safe_load(inner))[0][-1] == "extender"
    assert without_block(inner) == before["data"]["volcano-scheduler.conf"]


def test_a_quoted_configmap_value_becomes_a_literal_block():
    conf = VOLCANO_DEFAULT.replace("binpack", "binpack   ")  # trailing spaces make kubectl quote it
    text = yaml.safe_dump({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "volcano-scheduler-configmap"},
                           "data": {"volcano-scheduler.conf": conf}})
    result = merged(text)
    inner = yaml.safe_load(result.text)["data"]["volcano-scheduler.conf"]
    assert without_block(inner) == conf


@pytest.mark.parametrize("text, expected", [
    ("tiers: [\n", "CONF:2:1: not valid YAML"),
    ("actions: \"enqueue\"\n", "not a Volcano scheduler conf"),
    ("actions: x\ntiers:\n- plugins:\n  - arguments: {}\n", "CONF:4:5: a plugin without a name"),
    ("kind: ConfigMap\ndata:\n  other: x\n", "without data.volcano-scheduler.conf"),
])
def test_bad_input_says_where_and_what(text, expected):
    with pytest.raises(volcano_conf.ConfError, match=expected):
        volcano_conf.merge(text, volcano_conf.extender_plugin(), where="CONF")


# ---------------------------------------------------------------------------------------------
# the command line


@pytest.mark.slow
def test_cli_reads_stdin_and_prints_the_merged_conf():
    done = volcano_cli("-", "--url-prefix", "http://policy-extender.volcano-system.svc:8713", stdin=VOLCANO_DEFAULT)
    assert done.returncode == 0, done.stderr
    conf = yaml.safe_load(done.stdout)
    assert conf["tiers"][0]["plugins"][-1]["arguments"]["extender.urlPrefix"] == \
        "http://policy-extender.volcano-system.svc:8713"
    assert "note: actions has no preempt or reclaim" in done.stderr


@pytest.mark.slow
def test_cli_merge_option_and_refusal_exit_2(tmp_path):
    path = tmp_path / "current.conf"
    path.write_text(VOLCANO_CI)
    first = volcano_cli("--merge", str(path))
    assert first.returncode == 0 and first.stderr == ""
    path.write_text(first.stdout)
    again = volcano_cli("--merge", str(path))
    assert again.returncode == 2 and again.stdout == ""
    assert f"{path}:" in again.stderr and "--replace" in again.stderr
    replaced = volcano_cli(str(path), "--replace")
    assert replaced.returncode == 0 and replaced.stdout == first.stdout


@pytest.mark.slow
def test_cli_errors_exit_2(tmp_path):
    assert "cannot read" in volcano_cli(str(tmp_path / "missing.conf")).stderr
    assert volcano_cli(str(tmp_path / "missing.conf")).returncode == 2
    bad = volcano_cli("-", "--http-timeout", "100", stdin=VOLCANO_DEFAULT)
    assert bad.returncode == 2 and "not a Go duration" in bad.stderr
    assert volcano_cli().returncode == 2


def test_the_verb_arguments_are_every_verb_kind_in_the_shipped_order():
    shipped = [k for k in extender_arguments(CONFS["sidecar"]) if k.endswith("Verb")]
    assert [k for k in volcano_conf.extender_plugin()["arguments"] if k.endswith("Verb")] == shipped


def test_a_placement_in_a_new_tier_is_spliced_like_its_neighbours(monkeypatch):
    monkeypatch.setattr(volcano_conf, "placement", lambda tiers: volcano_conf.Placement(0, new_tier=True))
    for text in (VOLCANO_DEFAULT, CUSTOM):
        result = merged(text)
        names = plugin_names(yaml.safe_load(text))
        assert plugin_names(yaml.safe_load(result.text)) == [names[0], ["extender"], *names[1:]]
        assert result.notes == [] or all("re-serialised" not in n for n in result.notes)
        lines = result.text.splitlines(keepends=True)
        (start,) = [n for n, line in enumerate(lines) if re.fullmatch(r"-\s+name: extender", line.strip())]
        assert lines[start - 1].strip().startswith("-") and lines[start - 1].strip().endswith("plugins:")
        assert without_block("".join(lines[:start - 1] + lines[start:])) == text
