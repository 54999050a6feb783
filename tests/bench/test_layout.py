"""bench/'s layout: the scripts grouped by what they measure (``served/``, ``cpu/``, ``memory/``)
above the shared harness at the top (cluster generator, load client, servers, runner), and no
two modules importing each other, even through others or inside a function."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tests.support.imports import cycles

BENCH = Path(__file__).resolve().parents[2] / "bench"
GROUPS = ("served", "cpu", "memory")


def bench_imports() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for path in BENCH.rglob("*.py"):
        me = ".".join(path.relative_to(BENCH.parent).with_suffix("").parts)
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "bench":
                for alias in node.names:
                    sub = BENCH.parent.joinpath(*node.module.split("."), alias.name)
                    found = sub.with_suffix(".py").is_file() or (sub / "__init__.py").is_file()
                    targets.add(f"{node.module}.{alias.name}" if found else node.module)
            elif isinstance(node, ast.Import):
                targets |= {a.name for a in node.names if a.name.split(".")[0] == "bench"}
        graph[me] = targets - {me}
    return graph


def test_no_bench_module_imports_itself_through_others():
    graph = bench_imports()
    assert "bench.served.kube_scheduler" in graph and "bench.scenarios" in graph  # the walk found the tree
    assert not cycles(graph), f"import cycles in bench/: {cycles(graph)}"


def test_a_group_imports_the_harness_not_another_group_s_runner():
    # a group's script may use the harness and a sibling group's helpers, but the harness at the
    # top never imports a group's script other than the scenarios the runner lists
    graph = bench_imports()
    top = [m for m in graph if m.count(".") == 1 and m not in ("bench.scenarios", "bench.__main__")]
    wrong = {m: sorted(t for t in graph[m] if t.split(".")[1] in GROUPS) for m in top}
    assert not any(wrong.values()), f"harness modules importing group scripts: {wrong}"


def test_every_bench_module_the_docs_run_exists():
    root = BENCH.parent
    pages = [root / "BENCHMARKS.md", root / "README.md", *sorted((root / "docs").glob("*.md"))]
    named = {m for page in pages for m in re.findall(r"python -m (bench(?:\.\w+)*)", page.read_text(encoding="utf-8"))}
    assert "bench" in named and "bench.cpu.paired" in named  # the reader found them
    missing = sorted(m for m in named if not (root.joinpath(*m.split(".")).with_suffix(".py").is_file()
                                             or (root.joinpath(*m.split(".")) / "__main__.py").is_file()))
    assert not missing, f"the docs run bench modules that do not exist: {missing}"
