"""How the outcome engine is built per Volcano release (``engine.plan``), read from the one table
``e2e/volcano/releases/builds`` that scripts/build-engine reads too: from the module proxy, or from
Volcano's source beside the checkout (``../shared/volcano-src``) when it is there, and why not."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from policy_extender.fixture_runner import engine
from policy_extender.fixture_runner.engine import EngineUnavailable

REPO = Path(__file__).resolve().parents[2]
RELEASES = REPO / "e2e" / "volcano" / "releases"


def checkout(tmp_path: Path, shared_trees: dict[str, str] | None = None) -> Path:
    """A checkout's harness sources at tmp/repo/e2e/volcano, and, given trees, a shared folder
    beside it whose trees' pkg/scheduler/api holds one Go file of that text."""
    source = tmp_path / "repo" / "e2e" / "volcano"
    shutil.copytree(RELEASES, source / "releases")
    for tree, text in (shared_trees or {}).items():
        api = tmp_path / "shared" / "volcano-src" / tree / "pkg" / "scheduler" / "api"
        api.mkdir(parents=True)
        (api / "job_info.go").write_text(text)
    return source


def test_every_row_names_module_files_that_exist():
    rows = engine._rows(RELEASES / "builds")
    assert [r[0] for r in rows][:1] == ["v1.15.1"] and {"v1.14.1", "v1.10.0", "v1.13.3"} <= {r[0] for r in rows}
    for release, _tags, proxy, compat, shared in rows:
        assert all((RELEASES / name).is_file() and (RELEASES / name).with_suffix(".sum").is_file()
                   for name in (proxy, shared) if name != "-"), release
        assert compat in ("yes", "no")


def test_without_the_shared_folder_the_proxy_releases_build_and_the_others_say_why(tmp_path):
    source = checkout(tmp_path)
    assert engine.plan(source, "v1.15.1") == engine.Plan("v1.15.1", "", "v1.15.1.mod", True, None)
    assert engine.plan(source, "v1.10.0").tags == "volcano_v1_10"
    with pytest.raises(EngineUnavailable, match=r"v1\.13\.3 is built from Volcano's source beside the checkout"):
        engine.plan(source, "v1.13.3")
    with pytest.raises(EngineUnavailable, match="not one the outcome engine builds"):
        engine.plan(source, "v1.9.0")


def test_with_the_shared_folder_a_release_builds_from_it(tmp_path):
    source = checkout(tmp_path, {"volcano-v1.13.3": "package api\n", "apis-v1.15.0": "package api\n"})
    shared = tmp_path / "shared"
    assert engine.plan(source, "v1.13.3") == engine.Plan("v1.13.3", "volcano_v1_12", "v1.13.3.mod", False, shared)
    # v1.15.1 then builds against the real volcano.sh/apis v1.15.0, no added constant
    assert engine.plan(source, "v1.15.1") == engine.Plan("v1.15.1", "", "v1.15.1-apis-v1.15.0.mod", False, shared)


def test_a_source_tree_without_what_it_imports_is_refused_with_the_reason(tmp_path):
    imports = 'package api\nimport _ "volcano.sh/volcano/third_party/hami/util"\n'
    source = checkout(tmp_path, {"volcano-v1.16.0-alpha.1": imports, "volcano-v1.13.3": "package api\n"})
    with pytest.raises(EngineUnavailable, match="lacks third_party/"):
        engine.plan(source, "v1.16.0-alpha.1")
    with pytest.raises(EngineUnavailable, match=r"its source is not beside this checkout .*volcano-v1\.12\.4"):
        engine.plan(source, "v1.12.4")


def test_choose_release_knows_the_table(monkeypatch):
    assert engine.choose_release(None) == "v1.15.1"
    assert engine.choose_release("v1.13") == "v1.13.3" and engine.choose_release("1.11") == "v1.11.2"
    with pytest.raises(EngineUnavailable, match="supported: v1.15.1, v1.14.1, v1.10.0"):
        engine.choose_release("v1.9")
