"""Volcano's own scheduler code drives the service (e2e/volcano, scripts/e2e-volcano): every
outcome case of e2e/volcano/cases (through policy-extender test, the users' runner) on the newest stable and the oldest supported release in every run of the suite, the
others with E2E_VOLCANO_RELEASES="v1.15.1 v1.14.1 v1.10.0". Needs Go; the first build of a release
downloads and compiles Volcano (a few minutes), later ones reuse Go's caches."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RELEASES = os.environ.get("E2E_VOLCANO_RELEASES", "v1.15.1 v1.10.0").split()

pytestmark = pytest.mark.slow


@pytest.mark.timeout(2400)  # a fresh machine downloads ~1 GB of Go modules for the first build
@pytest.mark.parametrize("release", RELEASES)
def test_every_scenario_passes_with_volcanos_own_scheduler(release):
    run = subprocess.run(["bash", str(ROOT / "scripts" / "e2e-volcano"), release], cwd=ROOT,
                         capture_output=True, text=True, timeout=2300)
    print(run.stdout, run.stderr)
    summary = re.search(rf"^volcano {re.escape(release)}: (\d+) scenarios, (\d+) passed", run.stdout, re.M)
    assert summary, f"no summary line for {release}:\n{run.stdout}\n{run.stderr}"
    total, passed = map(int, summary.groups())
    assert run.returncode == 0 and total == passed and total >= 10, run.stdout
