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
            if not node.module:  # ``from . import x``: the names are modules
                found += [(node.lineno, f"{name}.{alias.name}") for alias in node.names]
    return found


@pytest.mark.parametrize("path", modules(), ids=lambda p: str(p.relative_to(ROOT)))
def test_the_product_never_imports_test_or_benchmark_tooling(path):
    bad = [(line, name) for line, name in imported(path) if name.split(".")[0] in {"tests", "bench", "reliability"}]
    assert not bad, f"{path.relative_to(ROOT)} imports tooling: {bad}"


def test_the_import_reader_resolves_relative_imports(tmp_path):
    # a check that cannot see relative imports would pass every module
    module = PACKAGE / "wire" / "views.py"
    names = {name for _, name in imported(module)}
    assert any(name.startswith("policy_extender.") for name in names), names
