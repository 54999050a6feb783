"""``policy-extender volcano-conf --final-victims``: the set's victim rules final in Volcano's
tiers (every other plugin's preempt and reclaim victim function off), comments kept; the shipped
confs are what it makes. Volcano's own scheduler proves it in the outcome cases of
policies/preemption.fixtures.yaml (tests/fixture_runner/test_outcome_engine.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from policy_extender.commands import volcano_conf
from policy_extender.verb_names.volcano import VICTIM_PLUGINS, VICTIM_SWITCH

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = [ROOT / "docker" / "k8s" / mode / "volcano-scheduler.conf" for mode in ("sidecar", "standalone")]

CONF = """\
# my scheduler
actions: "enqueue, allocate, preempt, reclaim, backfill"
tiers:
- plugins:
  - name: priority   # keep me
  - name: gang
    enablePreemptable: false
  - name: conformance
  - name: extender
    arguments:
      extender.urlPrefix: http://127.0.0.1:8713
      extender.preemptableVerb: preemptable
- plugins:
  - name: overcommit
  - name: drf
    enablePreemptable: true
  - name: predicates
  - name: proportion
  - name: capacity
"""


def switches(conf: dict) -> dict:
    return {p["name"]: {k: v for k, v in p.items() if k in VICTIM_SWITCH.values()}
            for tier in conf["tiers"] for p in tier["plugins"]}


def test_every_other_victim_plugin_is_switched_off_and_nothing_else_changes():
    result = volcano_conf.final_victims(CONF)
    got = yaml.safe_load(result.text)
    assert switches(got) == {
        "priority": {"enablePreemptable": False},
        "gang": {"enablePreemptable": False, "enableReclaimable": False},
        "conformance": {"enablePreemptable": False, "enableReclaimable": False},
        "extender": {}, "overcommit": {}, "predicates": {},
        "drf": {"enablePreemptable": False, "enableReclaimable": False},
        "proportion": {"enableReclaimable": False}, "capacity": {"enableReclaimable": False}}
    assert "# my scheduler" in result.text and "# keep me" in result.text  # edited in place
    before = yaml.safe_load(CONF)
    for tier in got["tiers"]:
        for plugin in tier["plugins"]:
            for switch in VICTIM_SWITCH.values():
                plugin.pop(switch, None)
    for tier in before["tiers"]:
        for plugin in tier["plugins"]:
            for switch in VICTIM_SWITCH.values():
                plugin.pop(switch, None)
    assert got == before
    assert "drf enablePreemptable" in result.notes[0] and "gang enablePreemptable" not in result.notes[0]


def test_it_is_idempotent_and_the_shipped_confs_are_what_it_makes():
    once = volcano_conf.final_victims(CONF).text
    assert volcano_conf.final_victims(once).text == once
    for conf in SHIPPED:
        again = volcano_conf.final_victims(conf.read_text())
        assert again.text == conf.read_text() and again.notes == [], f"{conf}: run volcano-conf --final-victims on it"


def test_the_shipped_confs_leave_the_extender_alone_with_victim_functions():
    for conf in SHIPPED:
        for tier in yaml.safe_load(conf.read_text())["tiers"]:
            for plugin in tier["plugins"]:
                for action in VICTIM_PLUGINS.get(plugin["name"], ()):
                    if plugin["name"] != "extender":
                        assert plugin.get(VICTIM_SWITCH[action]) is False, (conf, plugin)


def test_a_configmap_is_edited_inside_its_data():
    configmap = yaml.safe_dump({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "volcano-scheduler-configmap"},
                                "data": {"volcano-scheduler.conf": CONF}}, sort_keys=False)
    inner = yaml.safe_load(yaml.safe_load(volcano_conf.final_victims(configmap).text)["data"]["volcano-scheduler.conf"])
    assert switches(inner)["proportion"] == {"enableReclaimable": False}


def test_a_flow_mapping_plugin_is_re_serialised_with_a_note():
    flow = CONF.replace("  - name: proportion\n", "  - {name: proportion}\n")
    result = volcano_conf.final_victims(flow)
    assert switches(yaml.safe_load(result.text))["proportion"] == {"enableReclaimable": False}
    assert any("re-serialised" in note for note in result.notes)


def test_a_conf_without_the_extender_is_refused():
    with pytest.raises(volcano_conf.ConfError, match="no extender plugin"):
        volcano_conf.final_victims("tiers:\n- plugins:\n  - name: priority\n")


@pytest.mark.slow
def test_the_command_line_option(tmp_path):
    conf = tmp_path / "volcano-scheduler.conf"
    conf.write_text(CONF.replace("  - name: extender\n    arguments:\n      extender.urlPrefix: http://127.0.0.1:8713\n"
                                 "      extender.preemptableVerb: preemptable\n", ""))
    done = subprocess.run([sys.executable, "-m", "policy_extender", "volcano-conf", str(conf), "--final-victims"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    out = yaml.safe_load(done.stdout)
    assert switches(out)["conformance"] == {"enablePreemptable": False, "enableReclaimable": False}
    assert "--final-victims: switched off" in done.stderr
