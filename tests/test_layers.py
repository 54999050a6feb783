"""The package's layering, read from the import statements of every module (docs/architecture.md).

A module may import only from packages at its own layer or below; nothing in ``policy_extender``
imports the test or benchmark tooling."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "policy_extender"


def modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def imported(path: Path) -> list[tuple[int, str]]:
    """(line, absolute module name) of every import in ``path``, relative ones resolved."""
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    package = parts[:-1] if parts[-1] != "__init__" else parts[:-1]
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            name = ".".join(base + ([node.module] if node.module else []))
            found.append((node.lineno, name))
            # ``from policy_extender import metrics``, ``from . import x``: names that are modules
            found += [(node.lineno, f"{name}.{alias.name}") for alias in node.names
                      if _is_module(f"{name}.{alias.name}")]
    return found


def _is_module(name: str) -> bool:
    where = ROOT.joinpath(*name.split("."))
    return where.with_suffix(".py").is_file() or (where / "__init__.py").is_file()


@pytest.mark.parametrize("path", modules(), ids=lambda p: str(p.relative_to(ROOT)))
def test_the_product_never_imports_test_or_benchmark_tooling(path):
    bad = [(line, name) for line, name in imported(path) if name.split(".")[0] in {"tests", "bench", "reliability"}]
    assert not bad, f"{path.relative_to(ROOT)} imports tooling: {bad}"


def test_the_import_reader_resolves_relative_imports(tmp_path):
    # a check that cannot see relative imports would pass every module
    module = PACKAGE / "wire" / "views.py"
    names = {name for _, name in imported(module)}
    assert any(name.startswith("policy_extender.") for name in names), names


#: The layers of docs/architecture.md, lowest first: a module may import its own layer and the
#: ones below. ``verb_names`` (each protocol's verb names, importing nothing) is read by the
#: configuration, so it sits at the bottom with it.
LAYERS: list[tuple[str, ...]] = [
    ("errors", "schema", "instance", "logs", "metrics", "heap", "trace", "config", "store_url", "verb_names",
     "process", "__init__"),
    ("lang",),
    ("wire",),
    ("session",),
    ("decide",),
    ("policyset",),
    ("record",),
    ("service",),
    ("web", "gunicorn_conf", "fixture_runner"),
    ("replay",),
    ("commands", "cli", "__main__"),
]
#: Imports that would be allowed by layer but that the design rules out.
FORBIDDEN = {("fixture_runner", "web"), ("replay", "web"), ("web", "fixture_runner"), ("web", "replay")}


def part_of(name: str) -> str:
    """The layer entry a module belongs to: the longest listed prefix of its dotted name."""
    inside = name.removeprefix("policy_extender").lstrip(".") or "__init__"
    entries = [e for layer in LAYERS for e in layer]
    found = [e for e in entries if inside == e or inside.startswith(e + ".")]
    assert found, f"{name} is in no layer of tests/test_layers.py: add it to LAYERS and docs/architecture.md"
    return max(found, key=len)


def rank(entry: str) -> int:
    return next(i for i, layer in enumerate(LAYERS) if entry in layer)


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@pytest.mark.parametrize("path", modules(), ids=lambda p: str(p.relative_to(ROOT)))
def test_a_module_imports_only_its_layer_and_the_ones_below(path):
    mine = part_of(module_name(path))
    wrong = []
    for line, name in imported(path):
        if name.split(".")[0] != "policy_extender" or name == "policy_extender":
            continue
        theirs = part_of(name)
        top_mine, top_theirs = mine.split(".")[0], theirs.split(".")[0]
        if rank(theirs) > rank(mine) or (top_mine, top_theirs) in FORBIDDEN:
            wrong.append(f"line {line}: {name} ({theirs}, layer {rank(theirs)})")
    assert not wrong, f"{path.relative_to(ROOT)} ({mine}, layer {rank(mine)}) imports upward: {wrong}"


def test_every_package_says_what_it_does_and_what_it_may_import():
    for init in sorted(PACKAGE.glob("*/__init__.py")):
        doc = ast.get_docstring(ast.parse(init.read_text())) or ""
        assert "import" in doc.lower(), f"{init.relative_to(ROOT)}: the docstring must say what the package may import"
