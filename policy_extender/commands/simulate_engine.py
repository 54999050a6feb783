"""Where ``simulate`` finds Volcano's scheduler (the engine): the e2e harness of this repository,
``e2e/volcano`` built per Volcano release into ``e2e/volcano/.build/e2e-volcano-RELEASE``, and
how it is run. This is the one place that knows; it is meant to be folded into the engine module
of the outcome cases (issue 46, item 4) when both land.

``POLICY_EXTENDER_ENGINE`` names a built binary to use instead (its release must be the one
asked for). Without it, the binary of a source checkout is used, and built when missing
(``E2E_VOLCANO_BUILD_ONLY=1 bash scripts/e2e-volcano RELEASE``: Go needed, 2 to 4 minutes the
first time on 2 cores, seconds later).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

SUPPORTED = ("v1.15.1", "v1.14.1", "v1.10.0")  # newest first: the default is SUPPORTED[0]
ROOT = Path(__file__).resolve().parents[2]


class EngineError(Exception):
    """The engine cannot be found, built or run: one line saying what to do."""


def engine_binary(release: str) -> str:
    """The engine binary for ``release``, built first if this is a checkout without it."""
    if release not in SUPPORTED:
        raise EngineError(f"Volcano {release} is not supported; use one of {', '.join(SUPPORTED)} "
                          "(--volcano)")
    given = os.environ.get("POLICY_EXTENDER_ENGINE")
    if given:
        if not os.access(given, os.X_OK):
            raise EngineError(f"POLICY_EXTENDER_ENGINE={given}: not an executable file")
        return given
    binary = ROOT / "e2e" / "volcano" / ".build" / f"e2e-volcano-{release}"
    if binary.exists():
        return str(binary)
    script = ROOT / "scripts" / "e2e-volcano"
    if not script.exists():
        raise EngineError("Volcano's scheduler (the engine) is not installed with this copy of "
                          "policy-extender: run simulate from a source checkout, or set "
                          "POLICY_EXTENDER_ENGINE to a built e2e-volcano binary")
    if shutil.which("go") is None:
        raise EngineError(f"the engine for Volcano {release} is not built and building it needs Go "
                          "1.24 or later on PATH (https://go.dev/dl/); then run simulate again")
    print(f"policy-extender simulate: building the engine for Volcano {release} (once; 2 to 4 "
          "minutes the first time)", file=sys.stderr)
    build = subprocess.run(["bash", str(script), release], cwd=ROOT, stdout=sys.stderr,
                           env={**os.environ, "E2E_VOLCANO_BUILD_ONLY": "1"})
    if build.returncode != 0 or not binary.exists():
        raise EngineError(f"building the engine for Volcano {release} failed (output above); "
                          f"run: E2E_VOLCANO_BUILD_ONLY=1 bash scripts/e2e-volcano {release}")
    return str(binary)


def service_command() -> str:
    """The policy-extender command the engine starts `serve` and `why` with: this one."""
    script = Path(sys.executable).parent / "policy-extender"
    if script.exists():
        return str(script)
    return f"{sys.executable} -m policy_extender"


def run_engine(release: str, source: str, policy_dir: str | None, *, scheduler_conf: str | None = None,
               actions: str | None = None, serve_args: list[str] | None = None,
               timeout: float = 600) -> dict:
    """Run Volcano's scheduler on ``source`` (an onSessionOpen body .json, or a case .yaml)
    against a real ``policy-extender serve`` of ``policy_dir``: the outcome of each cycle."""
    binary = engine_binary(release)
    with tempfile.TemporaryDirectory(prefix="policy-extender-simulate-") as work:
        args = [binary, "-release", release, "-repo", str(ROOT), "-cli", service_command(),
                "-work", work, "-simulate", os.path.abspath(source)]
        if policy_dir:
            args += ["-policy-dir", os.path.abspath(policy_dir)]
        if scheduler_conf:
            args += ["-scheduler-conf", os.path.abspath(scheduler_conf)]
        if actions:
            args += ["-actions", actions]
        if serve_args:
            args += ["-serve-args", " ".join(serve_args)]
        try:
            run = subprocess.run(args, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise EngineError(f"Volcano's scheduler did not finish {source} within {timeout:.0f} s") from None
    if run.returncode != 0:
        message = run.stderr.strip().removeprefix("e2e-volcano: ") or f"exit status {run.returncode}"
        raise EngineError(f"{source}: {message}")
    try:
        return json.loads(run.stdout)
    except ValueError:
        raise EngineError(f"{source}: the engine printed no outcome:\n{run.stdout[-2000:]}") from None
