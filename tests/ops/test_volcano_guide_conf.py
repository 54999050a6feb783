"""The scheduler conf shown in docs/volcano.md (\"Point Volcano at it\") is the shipped sidecar conf
(comments aside)."""

import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]


def test_the_volcano_guide_conf_is_the_shipped_sidecar_conf():
    guide = (ROOT / "docs" / "volcano.md").read_text(encoding="utf-8")
    section = guide[guide.index("## Point Volcano at it"):]
    (block,) = re.findall(r"```yaml\n(.*?)```", section, flags=re.S)[:1]
    configmap = yaml.safe_load(block)
    shown = yaml.safe_load(configmap["data"]["volcano-scheduler.conf"])
    shipped = yaml.safe_load((ROOT / "docker" / "k8s" / "sidecar" / "volcano-scheduler.conf").read_text())
    assert shown == shipped, "copy docker/k8s/sidecar/volcano-scheduler.conf into docs/volcano.md"
