"""The replay report: a table for people, JSON for tools."""

from __future__ import annotations

import json
from collections import Counter

from .comparison import Outcome

COLUMNS = ("cycle#call", "verb", "task/job/queue", "node", "change", "before", "after", "rule")
WIDEST = 60


def summary(outcome: Outcome) -> dict:
    return {"cycles": outcome.cycles, "calls": outcome.calls, "decisions": outcome.decisions,
            "changes": len(outcome.changes),
            "by_kind": dict(sorted(Counter(c.kind for c in outcome.changes).items())),
            "problems": len(outcome.problems)}


def to_json(outcome: Outcome, against: str) -> str:
    return json.dumps({"against": against, "summary": summary(outcome),
                       "changes": [change.to_dict() for change in outcome.changes],
                       "problems": [{"file": p.file, "offset": p.offset, "message": p.message}
                                    for p in outcome.problems],
                       "notes": outcome.notes}, indent=2)


def to_text(outcome: Outcome, against: str) -> str:
    lines = [f"problem: {problem}" for problem in outcome.problems]
    lines += [f"note: {note}" for note in outcome.notes]
    if outcome.changes:
        lines += _table([_row(change) for change in outcome.changes])
    lines.append(_summary_line(outcome, against))
    return "\n".join(lines)


def _row(change) -> tuple[str, ...]:
    return (f"{_short(change.cycle)}#{change.index}", change.verb, change.subject, change.node,
            change.kind, change.before, change.after, change.rule)


def _short(cycle: str) -> str:
    """``20250602T080000.123Z-ab12cd34ef56ab12`` -> ``080000.123-ab12cd34``."""
    stamp, _, session = cycle.partition("Z-")
    return f"{stamp.partition('T')[2] or stamp}-{session[:8]}" if session else cycle


def _table(rows: list[tuple[str, ...]]) -> list[str]:
    cells = [COLUMNS, *[tuple(_clip(cell) for cell in row) for row in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(COLUMNS))]
    return ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in cells]


def _clip(text: str) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= WIDEST else text[:WIDEST - 1] + "…"


def _summary_line(outcome: Outcome, against: str) -> str:
    counts = summary(outcome)
    kinds = ", ".join(f"{n} {kind}" for kind, n in counts["by_kind"].items())
    verdict = f"{len(outcome.changes)} changes ({kinds})" if outcome.changes else "no changes"
    return (f"{verdict} against {against}: {outcome.cycles} cycles, {outcome.calls} calls, "
            f"{outcome.decisions} decisions replayed"
            + (f", {len(outcome.problems)} damaged records skipped" if outcome.problems else ""))
