"""The error-code catalogue (policy_extender/lang/codes.py) is the one place codes are written:
every code raised is catalogued, every catalogued code is raised somewhere, and each has a
golden case in tests/lang/cases."""

from __future__ import annotations

import io
import re
import tokenize
from pathlib import Path

import pytest

from policy_extender.lang import codes
from policy_extender.lang.codes import CATALOGUE

from .harness import load_cases

PACKAGE = Path(codes.__file__).resolve().parents[1]
CODE = re.compile(r"[EW]\d{3}")
SOURCES = sorted(path for path in PACKAGE.rglob("*.py") if path != Path(codes.__file__).resolve())


def literal_codes(path: Path) -> list[str]:
    """The string literals of a module that are exactly an error code ("E201")."""
    tokens = tokenize.generate_tokens(io.StringIO(path.read_text(encoding="utf-8")).readline)
    return [token.string for token in tokens
            if token.type == tokenize.STRING and CODE.fullmatch(token.string.strip("\"'"))]


def used_codes() -> dict[str, list[str]]:
    """{code: the modules that name it as ``codes.EXXX``}."""
    used: dict[str, list[str]] = {}
    for path in SOURCES:
        for code in set(re.findall(r"\bcodes\.([EW]\d{3})\b", path.read_text(encoding="utf-8"))):
            used.setdefault(code, []).append(str(path.relative_to(PACKAGE)))
    return used


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_module_writes_a_code_as_a_string(path):
    assert not literal_codes(path), \
        f"{path.name} writes {literal_codes(path)} as strings: name them from policy_extender.lang.codes"


def test_every_code_raised_is_in_the_catalogue():
    unknown = sorted(set(used_codes()) - set(CATALOGUE))
    assert not unknown, f"used but not catalogued in lang/codes.py: {unknown}"


def test_every_catalogued_code_is_raised_somewhere():
    unused = sorted(set(CATALOGUE) - set(used_codes()))
    assert not unused, f"catalogued but never used: {unused}"


def test_every_code_has_a_golden_case():
    covered = {code for case in load_cases() for said in ("error", "warning") if said in case
               for code in CODE.findall(case[said])}
    missing = sorted(set(CATALOGUE) - covered)
    assert not missing, f"no golden error case in tests/lang/cases for {missing}"


def test_each_entry_says_what_it_means_and_how_to_fix_it():
    assert list(CATALOGUE) == sorted(CATALOGUE)  # E codes, then the warnings' W codes
    for key, entry in CATALOGUE.items():
        assert key == entry.code == getattr(codes, key)
        assert entry.title and entry.meaning and entry.hint, key


def test_the_literal_finder_sees_a_code_written_as_a_string(tmp_path):
    module = tmp_path / "m.py"
    module.write_text('raise EvalError("E999", "message")  # E123 in a comment is no literal\n'
                      'x = "see E201 here"\n')
    assert literal_codes(module) == ['"E999"']
