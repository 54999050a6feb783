"""kube-scheduler's own code drives the service (e2e/volcano/kubescheduler, scripts/e2e-kube-scheduler):
its HTTP extender client and its scheduling loop, every scenario on the newest and the oldest
supported kube-scheduler in every run of the suite, the other with
E2E_KUBE_RELEASES="v1.35.3 v1.34.1 v1.30.2". Needs Go; it builds in the module of the Volcano
harness (the same Kubernetes sources and Go caches)."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RELEASES = os.environ.get("E2E_KUBE_RELEASES", "v1.35.3 v1.30.2").split()

pytestmark = pytest.mark.slow


@pytest.mark.timeout(2400)  # a fresh machine downloads the Go modules for the first build
@pytest.mark.parametrize("release", RELEASES)
def test_every_scenario_passes_with_kube_schedulers_own_code(release):
    run = subprocess.run(["bash", str(ROOT / "scripts" / "e2e-kube-scheduler"), release], cwd=ROOT,
                         capture_output=True, text=True, timeout=2300)
    print(run.stdout, run.stderr)
    summary = re.search(rf"^kube-scheduler {re.escape(release)}: (\d+) scenarios, (\d+) passed", run.stdout, re.M)
    assert summary, f"no summary line for {release}:\n{run.stdout}\n{run.stderr}"
    total, passed = map(int, summary.groups())
    assert run.returncode == 0 and total == passed and total >= 15, run.stdout
