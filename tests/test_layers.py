"""The package's layering, read from the import statements of every module (docs/architecture.md).

A module may import only from packages at its own layer or below, and only what its package's
``__init__`` docstring allows ("May import a, b and c; ..."); no two modules import each other,
even through others; no module imports another's private (``_``) names; a public class name has
one meaning across the package; nothing in ``policy_extender`` imports the test or benchmark tooling."""

from __future__ import annotations

import ast
import functools
import re
import sys
from collections import defaultdict
from pathlib import Path

import pytest

from tests.support.imports import cycles

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "policy_extender"


def modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


@functools.lru_cache(maxsize=None)
def parsed(path: Path) -> ast.Module:
    """``path``'s syntax tree, read once per test run."""
    return ast.parse(path.read_text(), str(path))


def imported(path: Path) -> list[tuple[int, str]]:
    """(line, absolute module name) of every import in ``path``, relative ones resolved."""
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    package = parts[:-1] if parts[-1] != "__init__" else parts[:-1]
    found = []
    for node in ast.walk(parsed(path)):
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
    ("replay", "lsp"),
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


def package_of(name: str) -> str:
    """The top-level part of ``policy_extender`` a module belongs to (``decide``, ``config``, ...)."""
    parts = name.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def allowed_imports(doc: str) -> tuple[set[str], set[str]]:
    """What a package docstring allows and rules out: ("May import a, b and c; never d or e.")."""
    text = " ".join(doc.split())
    may = re.search(r"May import (.*?)[;.:](?:\s|$)", text)
    assert may, "the docstring must say 'May import a, b and c;' (or 'May import nothing;')"
    never = re.search(r"never (.*?)(?:\s*\(|[;.:](?:\s|$))", text[may.end():])

    def names(listed: str) -> set[str]:
        return {n for n in re.split(r",\s*|\s+and\s+|\s+or\s+", listed.strip()) if n and n != "nothing"}
    return names(may.group(1)), names(never.group(1)) if never else set()


def test_the_docstring_reader_reads_what_may_and_may_not_be_imported():
    doc = "Does X.\nMay import lang, wire\nand errors; never web or replay (replay reads it).\n\nMore."
    assert allowed_imports(doc) == ({"lang", "wire", "errors"}, {"web", "replay"})
    assert allowed_imports("Names.\nMay import nothing; every layer reads them.") == (set(), set())


def packages() -> list[Path]:
    return sorted(PACKAGE.glob("*/__init__.py"))


@pytest.mark.parametrize("init", packages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_a_package_imports_only_what_its_docstring_allows(init):
    package = init.parent.name
    allowed, ruled_out = allowed_imports(ast.get_docstring(ast.parse(init.read_text())) or "")
    unknown = {name for name in allowed | ruled_out if not _is_module(f"policy_extender.{name}")}
    assert not unknown, f"{init.relative_to(ROOT)} names what is no part of policy_extender: {sorted(unknown)}"
    assert not allowed & ruled_out, f"{init.relative_to(ROOT)} both allows and rules out {sorted(allowed & ruled_out)}"
    wrong: list[str] = []
    for path in sorted(init.parent.rglob("*.py")):
        for line, name in imported(path):
            if name.split(".")[0] != "policy_extender" or name == "policy_extender":
                continue
            inside = name.removeprefix("policy_extender.")
            if package_of(name) != package and not any(inside == a or inside.startswith(a + ".") for a in allowed):
                wrong.append(f"{path.relative_to(ROOT)}:{line} imports {name}")
    assert not wrong, (f"{init.relative_to(ROOT)} allows only {sorted(allowed)}: change the code or, "
                       f"if the design allows it, the docstring (and docs/architecture.md): {wrong}")


def import_graph() -> dict[str, set[str]]:
    """module -> the modules of the package it imports (``from pkg import module`` names the module,
    not ``pkg``)."""
    graph: dict[str, set[str]] = {}
    for path in modules():
        me = module_name(path)
        targets: set[str] = set()
        for node in ast.walk(parsed(path)):
            if isinstance(node, ast.Import):
                targets |= {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom):
                base = _absolute(path, node)
                submodules = {f"{base}.{a.name}" for a in node.names if _is_module(f"{base}.{a.name}")}
                targets |= submodules
                if len(submodules) < len(node.names):
                    targets.add(base)
        graph[me] = {t for t in targets if t.split(".")[0] == "policy_extender" and t != me}
    return graph


def _absolute(path: Path, node: ast.ImportFrom) -> str:
    package = list(path.relative_to(ROOT).with_suffix("").parts)[:-1]
    base = package[: len(package) - node.level + 1] if node.level else []
    return ".".join(base + ([node.module] if node.module else []))


def test_no_module_imports_itself_through_others():
    found = cycles(import_graph())
    assert not found, f"import cycles (a module's import, even inside a function, reaches itself again): {found}"


def test_the_cycle_finder_sees_a_cycle_through_three_modules():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"e"}}
    assert cycles(graph) == [["a", "b", "c"]]


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def private_imports(path: Path) -> list[tuple[int, str, str]]:
    """(line, module, name) of every private name ``path`` takes from another module of the package:
    ``from module import _name`` or ``module._name`` on an imported module."""
    me = module_name(path)
    tree = parsed(path)
    found: list[tuple[int, str, str]] = []
    bound: dict[str, str] = {}  # local name -> the package's module it is bound to
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = _absolute(path, node)
            for alias in node.names:
                if _is_module(f"{base}.{alias.name}"):
                    bound[alias.asname or alias.name] = f"{base}.{alias.name}"
                elif _private(alias.name) and base.split(".")[0] == "policy_extender" and base != me:
                    found.append((node.lineno, base, alias.name))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "policy_extender":
                    bound[alias.asname or alias.name] = alias.name
                    found += [(node.lineno, alias.name, part) for part in alias.name.split(".") if _private(part)]
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in bound
                and _private(node.attr) and bound[node.value.id] != me):
            found.append((node.lineno, bound[node.value.id], node.attr))
    return found


@pytest.mark.parametrize("path", modules(), ids=lambda p: str(p.relative_to(ROOT)))
def test_a_module_takes_no_private_name_of_another(path):
    wrong = [f"line {line}: {module}.{name}" for line, module, name in private_imports(path)]
    assert not wrong, (f"{path.relative_to(ROOT)} uses private names of other modules: {wrong}; make them "
                       "public (drop the underscore) where they are defined, or move the code that needs them there")


def test_the_private_import_reader_sees_both_forms(tmp_path, monkeypatch):
    module = tmp_path / "policy_extender" / "reader.py"
    module.parent.mkdir()
    (module.parent / "__init__.py").write_text("")
    (module.parent / "other.py").write_text("")
    module.write_text("from policy_extender.other import _hidden, shown\n"
                      "from policy_extender import other\n"
                      "other._also(shown)\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    assert private_imports(module) == [(1, "policy_extender.other", "_hidden"), (3, "policy_extender.other", "_also")]


def public_classes() -> dict[str, list[str]]:
    """Public class name -> the modules that define one of that name at their top level."""
    defined: dict[str, list[str]] = defaultdict(list)
    for path in modules():
        for node in parsed(path).body:
            if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                defined[node.name].append(str(path.relative_to(ROOT)))
    return defined


def test_a_public_class_name_has_one_meaning_across_the_package():
    twice = {name: where for name, where in public_classes().items() if len(where) > 1}
    assert not twice, (f"public classes defined more than once: {twice}; name each for what it is "
                       "(a reader meeting the name should not have to ask which one)")


#: The most lines a Python file of the tree may have: past it a module holds more than one idea
#: (split it the way lang/checker.py gave its hints and params their own modules).
MOST_LINES = 700


def test_no_python_file_is_over_the_line_limit():
    files = [*modules(), *(ROOT / "bench").rglob("*.py"), *(ROOT / "tests").rglob("*.py")]
    assert len(files) > 300  # the walk found the tree
    long = {str(path.relative_to(ROOT)): n for path in files
            if (n := path.read_text(encoding="utf-8").count("\n")) > MOST_LINES}
    assert not long, f"files over {MOST_LINES} lines: {long}; split each into modules of one idea"


def suppressions(path: Path) -> list[tuple[int, str]]:
    """(line, text) of each ``type: ignore`` or ``noqa`` of ``path`` that does not name its code
    and say why (``# type: ignore[code]  # why``, ``# noqa: CODE  # why`` or ``# noqa: CODE (why)``)."""
    found = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        for marker in re.finditer(r"#\s*(type:\s*ignore|noqa)\b(.*)", line):
            rest = marker.group(2)
            coded = re.match(r"\[[a-z, -]+\]" if marker.group(1).startswith("type") else r":\s*[A-Z]+[0-9]+", rest)
            if not coded or not re.search(r"[A-Za-z]{3}", rest[coded.end():]):
                found.append((number, line.strip()))
    return found


def test_every_suppression_names_its_code_and_says_why():
    wrong = {str(path.relative_to(ROOT)): found for path in modules() if (found := suppressions(path))}
    assert not wrong, f"a type: ignore or noqa names its code and says why on its line: {wrong}"


def test_the_suppression_reader_wants_a_code_and_a_reason(tmp_path):
    module = tmp_path / "m.py"
    module.write_text("a = 1  # type: ignore\nb = 2  # type: ignore[arg-type]\nc = 3  # type: ignore[arg-type]  # why not\n"
                      "d = 4  # noqa: F401\ne = 5  # noqa: F401 (re-exported)\n")
    assert [n for n, _ in suppressions(module)] == [1, 2, 4]
