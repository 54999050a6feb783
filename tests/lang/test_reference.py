"""docs/language.md carries the generated field and builtin tables; they must match the code."""

from pathlib import Path

from policy_extender import schema
from policy_extender.lang import reference
from policy_extender.lang.builtins import BUILTINS

DOC = Path(__file__).parents[2] / "docs" / "language.md"


def test_the_docs_reference_tables_are_current():
    embedded = reference.embedded(DOC.read_text(encoding="utf-8"))
    assert embedded == reference.reference(), \
        "docs/language.md is stale: run python -m policy_extender.lang.reference --write docs/language.md"


def test_every_field_and_builtin_is_in_the_reference():
    text = reference.reference()
    for type_name, fields in schema.TYPES.items():
        for name in fields:
            assert f"`{type_name}.{name}`" in text
    for name in BUILTINS:
        assert f"`{name}(" in text


def test_check_mode_reports_a_stale_doc(tmp_path):
    stale = tmp_path / "language.md"
    stale.write_text(f"# doc\n\n{reference.BEGIN}\nold\n{reference.END}\n")
    assert reference.main(["--check", str(stale)]) == 1
    assert reference.main(["--write", str(stale)]) == 0
    assert reference.main(["--check", str(stale)]) == 0
