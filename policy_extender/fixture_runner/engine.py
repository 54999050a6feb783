"""The outcome engine: Volcano's own scheduler, built from the Go harness ``e2e/volcano`` for one
Volcano release, which runs an outcome case's cycle against a real ``policy-extender serve``.

Where the binary comes from, first found wins:

1. ``$POLICY_EXTENDER_ENGINE_DIR/e2e-volcano-<release>`` (the Docker image sets it: its engines
   are built when the image is);
2. the user's cache, ``$XDG_CACHE_HOME/policy-extender/engine`` (``~/.cache/...``): a binary
   built from these very sources (the directory is named after a hash of them, so an upgrade
   builds anew);
3. otherwise it is built there now with ``go build`` (Go 1.24 or later, and the Go module proxy):
   the first build of a release downloads Volcano and Kubernetes (about 1 GB into Go's module
   cache) and compiles them, 2 to 4 minutes on 2 cores (measured: 493 s on a machine loaded by
   other builds); a later build (the harness changed) reuses Go's caches: about a minute, most of
   it the link. It says so on standard error before it starts.

Without Go and without a built engine, :class:`EngineUnavailable` says in one line what is needed.

The same binary serves ``policy-extender simulate`` (:func:`simulate`: its ``-simulate`` mode runs
a recorded onSessionOpen body or a hand-written case and prints each cycle's outcome).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

#: The releases the engine is built for from the Go module proxy alone, newest first: the default
#: ones. Others are built from Volcano's source beside a checkout (``../shared/volcano-src``) where
#: it is there; ``e2e/volcano/releases/builds`` says how each is built (``plan``).
SUPPORTED = ("v1.15.1", "v1.14.1", "v1.10.0")
NEWEST = SUPPORTED[0]
ENGINE_DIR_ENV = "POLICY_EXTENDER_ENGINE_DIR"
SOURCE_ENV = "POLICY_EXTENDER_ENGINE_SOURCE"
#: volcano.sh/apis v1.15.x is not on the module proxy: v1.15 builds against v1.14.0 plus one
#: constant (e2e/volcano/compat/apis-v1.15), as scripts/e2e-volcano does.
COMPAT_APIS = "apis-v1.14.0-compat"
NO_GO = ("outcome cases need Volcano's scheduler, which is Go: install Go 1.24 or later (go on PATH) "
         "and the first run builds it (2 to 4 minutes, once per release), or run the cases in the "
         "policy-extender Docker image, which carries it built")


class EngineUnavailable(Exception):
    """No engine for this release, and none can be built here: one line saying what is needed."""


@dataclass(frozen=True)
class Engine:
    release: str
    binary: Path


    def run(self, scenario: dict, *, policy_extender: list[str] | None = None, timeout: float = 300) -> dict:
        """Run one scenario (the harness's format: ``e2e/volcano/scenario.go``) and return the
        harness's JSON report of what Volcano did (``e2e/volcano/outcome.go``)."""
        command = policy_extender or policy_extender_command()
        with tempfile.TemporaryDirectory(prefix="policy-extender-outcome-") as work:
            scenarios = Path(work) / "scenarios"
            scenarios.mkdir()
            (scenarios / "case.yaml").write_text(json.dumps(scenario), encoding="utf-8")  # JSON is YAML
            run = subprocess.run(
                [str(self.binary), "-json", "-one", "case", "-release", self.release, "-repo", work,
                 "-scenarios", str(scenarios), "-work", str(Path(work) / "run"), "-cli", " ".join(command)],
                capture_output=True, text=True, timeout=timeout, check=False)
        for line in run.stdout.splitlines():
            if line.startswith("{"):
                return json.loads(line)
        raise EngineError(f"Volcano's scheduler {self.release} gave no result (exit {run.returncode}): "
                          + (run.stderr.strip() or run.stdout.strip())[-2000:])


    def simulate(self, source: str, policy_dir: str | None, *, scheduler_conf: str | None = None,
                 actions: str | None = None, serve_args: list[str] | None = None, timeout: float = 600) -> dict:
        """Volcano's scheduler on ``source`` (an onSessionOpen body .json, or a case .yaml)
        against a real ``policy-extender serve`` of ``policy_dir``: the outcome of each cycle
        (``e2e/volcano/simulate.go``)."""
        with tempfile.TemporaryDirectory(prefix="policy-extender-simulate-") as work:
            args = [str(self.binary), "-release", self.release, "-repo", str(REPO), "-cli",
                    " ".join(policy_extender_command()), "-work", work, "-simulate", os.path.abspath(source)]
            if policy_dir:
                args += ["-policy-dir", os.path.abspath(policy_dir)]
            if scheduler_conf:
                args += ["-scheduler-conf", os.path.abspath(scheduler_conf)]
            if actions:
                args += ["-actions", actions]
            if serve_args:
                args += ["-serve-args", " ".join(serve_args)]
            try:
                run = subprocess.run(args, capture_output=True, text=True, timeout=timeout, check=False)
            except subprocess.TimeoutExpired:
                raise EngineError(f"Volcano's scheduler did not finish {source} within {timeout:.0f} s") from None
        if run.returncode != 0:
            message = run.stderr.strip().removeprefix("e2e-volcano: ") or f"exit status {run.returncode}"
            raise EngineError(f"{source}: {message}")
        try:
            return json.loads(run.stdout)
        except ValueError:
            raise EngineError(f"{source}: the engine printed no outcome:\n{run.stdout[-2000:]}") from None


@dataclass(frozen=True)
class Plan:
    """How the harness is built for one release (a row of ``e2e/volcano/releases/builds``)."""
    release: str
    tags: str
    module_file: str          # in ``releases/``
    compat: bool              # volcano.sh/apis v1.14.0 plus one constant first (``_compat_apis``)
    shared: Path | None       # ``../shared`` (beside the checkout) the module file's paths point into


def shared_root(source: Path) -> Path:
    """Where a checkout keeps Volcano's source for the releases the proxy does not serve: the
    ``shared`` folder beside it (the module files name it ``../../../shared``)."""
    return source.resolve().parents[1].parent / "shared"


def plan(source: Path, release: str) -> Plan:
    """How ``release`` is built here; ``EngineUnavailable`` saying why when it cannot be."""
    rows = {row[0]: row for row in _rows(source / "releases" / "builds")}
    if release not in rows:
        raise EngineUnavailable(f"Volcano {release} is not one the outcome engine builds; it builds "
                                f"{', '.join(rows)} (e2e/volcano/releases/builds)")
    _, tags, proxy, compat, shared = rows[release]
    tags = "" if tags == "-" else tags
    here = shared_root(source)
    if shared != "-" and (here / "volcano-src").is_dir():
        why = _unbuildable(source / "releases" / shared, here)
        if why:
            raise EngineUnavailable(f"Volcano {release} cannot be built here: {why}")
        return Plan(release, tags, shared, False, here)
    if proxy != "-":
        return Plan(release, tags, proxy, compat == "yes", None)
    raise EngineUnavailable(f"Volcano {release} is built from Volcano's source beside the checkout "
                            "(../shared/volcano-src), which is not here: the Go module proxy does not serve it")


def _rows(table: Path) -> list[list[str]]:
    lines = table.read_text(encoding="utf-8").splitlines() if table.is_file() else []
    return [line.split() for line in lines if line.strip() and not line.startswith("#")]


def _unbuildable(module_file: Path, shared: Path) -> str:
    """Why the source tree a module file replaces Volcano with cannot build, or ''."""
    text = module_file.read_text(encoding="utf-8")
    named = next((line.split("=>")[1].strip() for line in text.splitlines()
                  if line.strip().startswith("volcano.sh/volcano =>")), "")
    tree = shared / named.removeprefix("../../../shared/") if named.startswith("../../../shared/") else None
    if tree is None:
        return ""
    if not tree.is_dir():
        return f"its source is not beside this checkout ({tree})"
    api = tree / "pkg" / "scheduler" / "api"
    imports_third_party = any("volcano.sh/volcano/third_party" in path.read_text(encoding="utf-8", errors="replace")
                              for path in api.rglob("*.go"))
    if imports_third_party and not (tree / "third_party").is_dir():
        return (f"its source tree ({tree.name}) lacks third_party/, which pkg/scheduler/api imports "
                "(third_party/hami/util)")
    return ""


class EngineError(Exception):
    """The engine ran but reported nothing: its own error text."""


#: The checkout (or installation) this module belongs to: the shipped sidecar conf is under it.
REPO = Path(__file__).resolve().parents[2]


def simulate(release: str | None, source: str, policy_dir: str | None, **options) -> dict:
    """:meth:`Engine.simulate` with the engine of ``release`` (found or built: :func:`engine_for`)."""
    return engine_for(release).simulate(source, policy_dir, **options)


def policy_extender_command() -> list[str]:
    """The command that starts this very policy-extender (the one running these cases)."""
    script = Path(sys.executable).with_name("policy-extender")
    if script.is_file():
        return [str(script)]
    return [sys.executable, "-m", "policy_extender"]


def source_dir() -> Path | None:
    """The harness's Go sources: ``$POLICY_EXTENDER_ENGINE_SOURCE`` or this checkout's e2e/volcano."""
    given = os.environ.get(SOURCE_ENV)
    candidates = [Path(given)] if given else [Path(__file__).resolve().parents[2] / "e2e" / "volcano"]
    for candidate in candidates:
        if (candidate / "releases").is_dir() and (candidate / "main.go").is_file():
            return candidate
    return None


def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "policy-extender" / "engine"


def choose_release(release: str | None) -> str:
    """``release`` checked against the supported ones (``v1.15`` picks the newest v1.15.x); the
    newest when None."""
    if not release:
        return NEWEST
    wanted = release if release.startswith("v") or release == "master" else "v" + release
    source = source_dir()
    known = [row[0] for row in _rows(source / "releases" / "builds")] if source else list(SUPPORTED)
    if wanted in known:
        return wanted
    for candidate in known:
        if candidate.startswith(wanted + "."):
            return candidate
    raise EngineUnavailable(f"Volcano {release} is not supported by the outcome engine; supported: "
                            f"{', '.join(SUPPORTED)}, and from Volcano's source beside a checkout: "
                            f"{', '.join(k for k in known if k not in SUPPORTED) or 'none'} (--volcano RELEASE)")


def engine_for(release: str | None = None, *, log=sys.stderr) -> Engine:
    """The engine for ``release`` (the newest supported without one), built if needed."""
    release = choose_release(release)
    prebuilt = os.environ.get(ENGINE_DIR_ENV)
    if prebuilt and (Path(prebuilt) / f"e2e-volcano-{release}").is_file():
        return Engine(release, Path(prebuilt) / f"e2e-volcano-{release}")
    source = source_dir()
    if source is None:
        where = f" (${ENGINE_DIR_ENV} has no e2e-volcano-{release})" if prebuilt else ""
        raise EngineUnavailable("outcome cases need Volcano's scheduler, and this installation has neither "
                                f"a built engine{where} nor its Go sources: run them from a checkout of "
                                "policy-extender (with Go 1.24 or later) or in the policy-extender Docker "
                                "image, which carries the engine built")
    binary = cache_root() / f"{release}-{source_hash(source, release)}" / f"e2e-volcano-{release}"
    if binary.is_file():
        return Engine(release, binary)
    build(source, release, binary, log=log)
    return Engine(release, binary)


def source_hash(source: Path, release: str) -> str:
    """A hash of the harness's sources and the release's module files: a changed harness builds anew."""
    digest = hashlib.sha256(release.encode())
    for path in sorted(_source_files(source)):
        digest.update(str(path.relative_to(source)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def _source_files(source: Path):
    for path in source.rglob("*"):
        relative = path.relative_to(source)
        if path.is_file() and relative.parts[0] not in (".build", "kubescheduler", "scenarios", "cases", "bench") \
                and (path.suffix in (".go", ".mod", ".sum", ".txt") or path.name in ("generate", "builds")):
            yield path


def build(source: Path, release: str, binary: Path, *, log=sys.stderr) -> None:
    """``go build`` of the harness for ``release`` into ``binary``. The sources are copied to one
    fixed place (``<cache>/src``, under a lock), so that Go's build cache, keyed by paths too,
    serves every later build of the release in seconds."""
    go = shutil.which("go")
    if go is None:
        raise EngineUnavailable(NO_GO)
    how = plan(source, release)
    module_file = source / "releases" / how.module_file
    if not module_file.is_file():
        raise EngineUnavailable(f"Volcano {release}: no {module_file} in the engine's sources")
    root = cache_root()
    root.mkdir(parents=True, exist_ok=True)
    binary.parent.mkdir(parents=True, exist_ok=True)
    with open(root / "build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if binary.is_file():  # another process built it while this one waited
            return
        copy = root / "src"
        if copy.exists():
            for entry in copy.iterdir():
                if entry.name != ".build":
                    shutil.rmtree(entry) if entry.is_dir() else entry.unlink()
        shutil.copytree(source, copy, dirs_exist_ok=True,
                        ignore=shutil.ignore_patterns(".build", "scenarios", "cases", "kubescheduler"))
        print(f"policy-extender: building Volcano's scheduler {release} (the outcome engine) into {binary.parent}: "
              "the first build of a release downloads Volcano and Kubernetes (about 1 GB of Go modules) and "
              "compiles them, 2 to 4 minutes on 2 cores (8 on a busy machine); a changed harness later builds in about a minute",
              file=log, flush=True)
        started = time.monotonic()
        environment = dict(os.environ)
        if how.compat:
            _compat_apis(go, copy, environment)
        if how.shared is not None:  # the copy is elsewhere: its module file names ../shared absolutely
            copied = copy / "releases" / how.module_file
            copied.write_text(copied.read_text(encoding="utf-8").replace("../../../shared/", f"{how.shared}/"),
                              encoding="utf-8")
        temporary = binary.with_name(binary.name + ".tmp")
        run = subprocess.run([go, "build", "-buildvcs=false", f"-modfile=releases/{how.module_file}", "-tags", how.tags,
                              "-o", str(temporary), "."], cwd=copy, env=environment, capture_output=True, text=True,
                             check=False)
        if run.returncode != 0:
            raise EngineUnavailable(f"building Volcano's scheduler {release} failed (go build in {copy}): "
                                    + " ".join(run.stderr.strip().splitlines()[-3:]))
        os.replace(temporary, binary)
        print(f"policy-extender: built Volcano's scheduler {release} in {time.monotonic() - started:.0f}s",
              file=log, flush=True)


def _compat_apis(go: str, copy: Path, environment: dict) -> None:
    download = subprocess.run([go, "mod", "download", "-json", "volcano.sh/apis@v1.14.0"], cwd=copy,
                              env=environment, capture_output=True, text=True, check=False)
    if download.returncode != 0:
        raise EngineUnavailable("cannot download volcano.sh/apis v1.14.0 from the Go module proxy: "
                                + download.stderr.strip()[-300:])
    apis = Path(json.loads(download.stdout)["Dir"])
    target = copy / ".build" / COMPAT_APIS
    if (target / ".complete").is_file():
        return
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(apis, target)
    for root, _, files in os.walk(target):
        os.chmod(root, 0o755)
        for name in files:
            os.chmod(os.path.join(root, name), 0o644)
    constant = (copy / "compat" / "apis-v1.15" / "zz_queue_allocation_gate.go.txt").read_text(encoding="utf-8")
    for package in ("scheduling", "scheduling/v1beta1"):
        (target / "pkg" / "apis" / package / "zz_queue_allocation_gate.go").write_text(
            f"package {Path(package).name}\n\n{constant}", encoding="utf-8")
    (target / ".complete").touch()
