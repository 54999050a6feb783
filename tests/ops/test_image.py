"""The Docker image, tested without Docker (no daemon here): the Dockerfile's promises, the build
context its COPY lines see through .dockerignore, and the wheel those sources build."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "docker" / "Dockerfile"


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    text = re.sub(r"\\\n(\s*#.*\n)*", " ", DOCKERFILE.read_text())
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.strip().startswith("#")]
    return [(line.split(None, 1)[0].upper(), line.split(None, 1)[1]) for line in lines]


def stages() -> list[list[tuple[str, str]]]:
    result: list[list[tuple[str, str]]] = []
    for instruction in instructions():
        if instruction[0] == "FROM":
            result.append([])
        result[-1].append(instruction)
    return result


def final_stage() -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for name, args in stages()[-1]:
        found.setdefault(name, []).append(args)
    return found


def copy_sources() -> list[str]:
    """Source patterns of every COPY from the build context (not --from another stage)."""
    sources = []
    for name, args in instructions():
        words = [w for w in args.split() if not w.startswith("--")]
        if name == "COPY" and "--from" not in args:
            sources += words[:-1]
    return sources


def dockerignore_patterns() -> list[str]:
    lines = (ROOT / ".dockerignore").read_text().splitlines()
    return [line.strip() for line in lines if line.strip() and not line.startswith("#")]


def _pattern_regex(pattern: str) -> re.Pattern:
    parts = re.split(r"(\*\*|\*|\?)", pattern.strip("/"))
    table = {"**": ".*", "*": "[^/]*", "?": "[^/]"}
    return re.compile("".join(table.get(p, re.escape(p)) for p in parts))


def in_context(path: str, patterns: list[str]) -> bool:
    """Docker's rule: the last pattern matching the path or one of its parents decides."""
    parts = path.split("/")
    prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    included = True
    for pattern in patterns:
        negated = pattern.startswith("!")
        regex = _pattern_regex(pattern.lstrip("!"))
        if any(regex.fullmatch(prefix) for prefix in prefixes):
            included = negated
    return included


def context_files(source: str) -> list[str]:
    matches = sorted(ROOT.glob(source))
    files = [p for m in matches for p in ([m] if m.is_file() else sorted(m.rglob("*")))]
    return [str(p.relative_to(ROOT)) for p in files if p.is_file() and "__pycache__" not in p.parts]


def build_stage_copies() -> list[tuple[str, str]]:
    """(source, destination under the build stage's WORKDIR) of the build stage's COPY lines."""
    copies = []
    for name, args in stages()[0]:
        if name == "COPY":
            *sources, destination = args.split()
            copies += [(source, destination) for source in sources]
    return copies


# ---------------------------------------------------------------------------------------------
# the Dockerfile


def test_builds_in_three_stages_wheels_engines_and_the_slim_image():
    assert [s[0][1] for s in stages()] == ["python:3.11-slim AS build", "golang:1.25-bookworm AS engine",
                                           "python:3.11-slim"]
    assert any("pip wheel" in args for name, args in stages()[0] if name == "RUN")
    final_runs = " ".join(args for name, args in stages()[-1] if name == "RUN")
    assert "--no-index" in final_runs and "from=build" in final_runs


def test_the_engine_stage_builds_every_supported_release_and_the_image_carries_them():
    """Outcome cases run on the image without Go (docs/testing-policies.md, "The engine")."""
    from policy_extender.fixture_runner.engine import ENGINE_DIR_ENV, SUPPORTED
    engine = dict(stages()[1][1:2])["ARG"] if stages()[1][1][0] == "ARG" else ""
    assert engine == 'ENGINES="' + " ".join(SUPPORTED) + '"'
    runs = " ".join(args for name, args in stages()[1] if name == "RUN")
    assert "scripts/build-engine" in runs and "CGO_ENABLED=0" in runs
    # the Go module files the harness builds with: golang:1.25 is at least every release's go line
    for release in SUPPORTED:
        mod = (ROOT / "e2e" / "volcano" / "releases" / f"{release}.mod").read_text()
        go_line = re.search(r"^go (\d+)\.(\d+)", mod, re.M)
        assert (int(go_line.group(1)), int(go_line.group(2))) <= (1, 25), release
    stage = final_stage()
    env = dict(re.findall(r"(\w+)=(\S+)", " ".join(stage["ENV"])))
    assert any("--from=engine" in args and args.endswith(env[ENGINE_DIR_ENV] + "/") for args in stage["COPY"])


def test_runs_as_a_non_root_user():
    (user,) = final_stage()["USER"]
    assert user.split(":")[0] not in ("0", "root")


def test_exposes_the_port_it_binds_and_serves_the_policies_it_ships():
    stage = final_stage()
    env = dict(re.findall(r"(\w+)=(\S+)", " ".join(stage["ENV"])))
    assert stage["EXPOSE"] == ["8713"]
    assert env["POLICY_EXTENDER_BIND"] == "0.0.0.0:8713"
    assert env["POLICY_EXTENDER_POLICY_DIRS"] == "/etc/policy-extender/policies"
    assert any(args.endswith("/etc/policy-extender/policies/") for args in stage["COPY"])
    assert env["PROMETHEUS_MULTIPROC_DIR"].startswith("/tmp/")
    assert json.loads(stage["ENTRYPOINT"][0]) == ["policy-extender", "serve"]


def healthcheck_command() -> list[str]:
    (args,) = final_stage()["HEALTHCHECK"]
    return json.loads(args.split("CMD", 1)[1])


def test_healthcheck_asks_healthz_with_python_not_curl():
    command = healthcheck_command()
    assert command[:2] == ["python", "-c"]
    assert "/healthz" in command[2] and "curl" not in command[2]


@pytest.mark.slow
def test_healthcheck_fails_when_nothing_listens():
    port = free_port()
    result = subprocess.run(healthcheck_command(), env={**os.environ, "POLICY_EXTENDER_BIND": f"0.0.0.0:{port}"},
                            capture_output=True, timeout=30)
    assert result.returncode != 0


def free_port() -> int:
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---------------------------------------------------------------------------------------------
# the build context


#: what a copied directory holds that the image leaves out on purpose (.dockerignore says so): the
#: harness's local builds and its cases, and the kube-scheduler harness beside it
LEFT_OUT = ("e2e/volcano/.build/", "e2e/volcano/cases/", "e2e/volcano/kubescheduler/")


def test_every_copied_file_is_in_the_build_context():
    patterns = dockerignore_patterns()
    for source in copy_sources():
        files = [f for f in context_files(source) if not f.startswith(LEFT_OUT)]
        assert files, f"COPY {source}: nothing in the repository matches"
        excluded = [f for f in files if not in_context(f, patterns)]
        assert not excluded, f"COPY {source}: .dockerignore leaves out {excluded[:3]}"


@pytest.mark.parametrize("path", [".git/HEAD", "tests/ops/test_image.py", "docs/architecture.md",
                                  "policies/gang.fixtures.yaml", "policy_extender/__pycache__/x.pyc",
                                  ".venv/bin/python"])
def test_the_context_leaves_out_what_the_image_does_not_need(path):
    assert not in_context(path, dockerignore_patterns())


def _can_build_wheels_offline() -> bool:
    """setuptools >= 70.1 builds wheels itself; older ones need the ``wheel`` package."""
    import importlib.util
    return any(importlib.util.find_spec(name) is not None
               for name in ("setuptools.command.bdist_wheel", "wheel"))


@pytest.mark.slow
@pytest.mark.skipif(not _can_build_wheels_offline(), reason="no offline wheel builder: install the "
                    "`wheel` package (the Docker build gets one through pip's build isolation)")
def test_the_copied_sources_build_a_wheel_that_imports_outside_the_repository(tmp_path):
    context = tmp_path / "context"
    for source, destination in build_stage_copies():
        for file in context_files(source):
            if in_context(file, dockerignore_patterns()):
                target = context / destination / Path(file).relative_to(Path(source).parent if
                                                                         (ROOT / source).is_file() else source)
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy(ROOT / file, target)
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                            "-w", str(tmp_path / "wheels"), str(context)], capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr
    (wheel,) = (tmp_path / "wheels").glob("policy_extender-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "policy_extender/grammar/policy.lark" in names
    assert {"policy_extender/metrics.py", "policy_extender/logs.py", "policy_extender/gunicorn_conf.py"} <= set(names)
    assert any(n.endswith("entry_points.txt") for n in names)

    site = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(site), str(wheel)],
                   check=True, timeout=300)
    code = ("import policy_extender.policyset as p, sys; assert p.__file__.startswith(sys.argv[1]);"
            "p.compile_sources({'a.policy': 'filter node.labels.zone == task.annotations.zone'})")
    subprocess.run([sys.executable, "-c", code, str(site)], check=True, cwd=tmp_path,
                   env={**os.environ, "PYTHONPATH": str(site)}, timeout=60)
