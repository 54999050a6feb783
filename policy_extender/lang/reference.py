"""The generated parts of docs/language.md: the context field table (from ``schema``, with what
each protocol sends), the builtin table (from ``lang.builtins``) and the error codes (from
``lang.codes``). ``python -m policy_extender.lang.reference`` prints them;
``--check docs/language.md`` exits 1 when the doc's copy is stale, ``--write`` refreshes it."""

from __future__ import annotations

import sys
from pathlib import Path

from policy_extender import schema
from policy_extender.lang.builtins import BUILTINS
from policy_extender.lang.codes import CATALOGUE

BEGIN = "<!-- BEGIN GENERATED REFERENCE (python -m policy_extender.lang.reference --write docs/language.md) -->"
END = "<!-- END GENERATED REFERENCE -->"


def field_table() -> str:
    """Every field, and whether each scheduler that does not send everything (kube-scheduler) sends it."""
    partial = [p for p in schema.PROTOCOL_FIELDS if any(not schema.sends(p, t, f) for t, fs in schema.TYPES.items()
                                                          for f in fs)]
    lines = [f"| field | type | unit | meaning |{''.join(f' {p} |' for p in partial)}",
             f"|---|---|---|---|{'---|' * len(partial)}"]
    for type_name, fields in schema.TYPES.items():
        for f in fields.values():
            source = " (session)" if f.session else ""
            sent = "".join(f" {'sent' if schema.sends(p, type_name, f.name) else 'no'} |" for p in partial)
            lines.append(f"| `{type_name}.{f.name}` | `{f.type}` | {_unit(f.unit)} | {_cell(f.doc)}{source} |{sent}")
    return "\n".join(lines)


def roots_table() -> str:
    lines = ["| rule kind | names it can read |", "|---|---|"]
    lines += [f"| `{kind}` | {', '.join(f'`{n}` ({t})' for n, t in roots.items())} |"
              for kind, roots in schema.DECISION_ROOTS.items()]
    return "\n".join(lines)


def shorthand_table() -> str:
    lines = ["| shorthand | stands for | meaning |", "|---|---|---|"]
    lines += [f"| `{name}` | `{text}` | {doc} |" for name, (text, doc) in schema.SHORTHANDS.items()]
    return "\n".join(lines)


def builtin_table() -> str:
    lines = ["| builtin | meaning |", "|---|---|"]
    lines += [f"| `{_cell(b.signature())}` | {_cell(b.doc)} |" for b in BUILTINS.values()]
    return "\n".join(lines)


def error_table() -> str:
    lines = ["| code | title | meaning | hint |", "|---|---|---|---|"]
    lines += [f"| {c.code} | {_cell(c.title)} | {_cell(c.meaning)} | {_cell(c.hint)} |" for c in CATALOGUE.values()]
    return "\n".join(lines)


def reference() -> str:
    return "\n\n".join([BEGIN, "### Context fields", field_table(), "### Names per rule kind", roots_table(),
                        "### Shorthands", shorthand_table(), "### Builtins", builtin_table(),
                        "### Error codes", error_table(), END])


def _unit(unit: str) -> str:
    return _cell(unit) if unit else ""


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def embedded(doc: str) -> str | None:
    """The generated block as it stands in ``doc``, or None."""
    start, end = doc.find(BEGIN), doc.find(END)
    return doc[start:end + len(END)] if start >= 0 and end > start else None


def refreshed(doc: str) -> str:
    current = embedded(doc)
    return doc.replace(current, reference()) if current else doc.rstrip("\n") + "\n\n" + reference() + "\n"


def main(argv: list[str]) -> int:
    if len(argv) == 2 and argv[0] in ("--check", "--write"):
        path = Path(argv[1])
        doc = path.read_text(encoding="utf-8")
        if argv[0] == "--write":
            path.write_text(refreshed(doc), encoding="utf-8")
            return 0
        stale = embedded(doc) != reference()
        print(f"{path}: the generated reference is {'stale' if stale else 'current'}")
        return 1 if stale else 0
    print(reference())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
