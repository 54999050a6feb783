"""Fixture files (``*.fixtures.yaml``) in the editor: the loader's errors as diagnostics, one lens
per case, and running a case through the fixture runner (``policy-extender test``'s own path).

A fixture file is read from disk (its ``policies:`` and ``body_file:`` are paths relative to it),
so its diagnostics follow each save."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from policy_extender.fixture_runner.loader import load_file
from policy_extender.fixture_runner.model import FixtureError
from policy_extender.fixture_runner.runner import run_cases

SUFFIX = ".fixtures.yaml"


def is_fixture_file(path: Path) -> bool:
    return path.name.endswith(SUFFIX)


@dataclass(frozen=True)
class FixtureProblem:
    line: int      # 1-based
    column: int
    message: str


@dataclass(frozen=True)
class Lens:
    line: int      # 1-based: the case's first line
    name: str


def read(path: Path) -> tuple[list[FixtureProblem], list[Lens]]:
    """The file's errors (the whole file's, or each malformed case's) and a lens per case."""
    try:
        cases = load_file(path)
    except FixtureError as error:
        return [FixtureProblem(error.mark.line, error.mark.column, error.message)], []
    problems = [FixtureProblem(c.error.mark.line, c.error.mark.column, c.error.message) for c in cases if c.error]
    return problems, [Lens(c.mark.line, c.name) for c in cases]


def run(path: Path, name: str | None = None) -> list[dict]:
    """Run the file's cases (or the one called ``name``): each one's status and message."""
    try:
        cases = [c for c in load_file(path) if name is None or c.name == name]
    except FixtureError as error:
        return [{"case": name or path.name, "status": "ERROR", "message": str(error)}]
    results = run_cases(cases).results
    return [{"case": r.case.name, "status": r.outcome, "message": r.message or ""} for r in results]
