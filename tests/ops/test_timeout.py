"""The shipped ``extender.httpTimeout`` and the service's ``volcano_timeout`` agree, everywhere
they are written, so the late-open warning fires exactly when Volcano gives up on an open."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from policy_extender.config import Config

ROOT = Path(__file__).resolve().parents[2]
CONFS = [ROOT / "docker/k8s/sidecar/volcano-scheduler.conf", ROOT / "docker/k8s/standalone/volcano-scheduler.conf"]
GO_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def go_duration(text: str) -> float:
    """Seconds of a Go duration such as ``1s``, ``250ms`` or ``1m30s`` (time.ParseDuration)."""
    parts = re.findall(r"(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)", text)
    assert parts and "".join(n + u for n, u in parts) == text, f"not a Go duration: {text!r}"
    return sum(float(n) * GO_UNITS[u] for n, u in parts)


def shipped_timeout(conf: Path) -> str:
    tiers = yaml.safe_load(conf.read_text())["tiers"]
    (plugin,) = [p for tier in tiers for p in tier["plugins"] if p["name"] == "extender"]
    return plugin["arguments"]["extender.httpTimeout"]


@pytest.mark.parametrize("conf", CONFS, ids=lambda p: p.parent.name)
def test_the_shipped_timeout_is_the_services_volcano_timeout_default(conf):
    assert go_duration(shipped_timeout(conf)) == Config().volcano_timeout


def test_the_volcano_guide_shows_the_shipped_timeout():
    shipped = shipped_timeout(CONFS[0])
    guide = (ROOT / "docs" / "volcano.md").read_text()
    assert f"extender.httpTimeout: {shipped}\n" in guide
    assert f"| `extender.httpTimeout` | `{shipped}` |" in guide
    assert f"| `extender.httpTimeout` | `{shipped}` |" in (ROOT / "docs/operations.md").read_text()


def test_go_durations_parse_as_volcano_reads_them():
    assert go_duration("1s") == 1.0 and go_duration("250ms") == 0.25 and go_duration("1m30s") == 90.0
