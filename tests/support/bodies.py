"""The sample request bodies: one per Volcano verb, as compact JSON, the way Volcano sends them.

Kept in the repository so the suite runs wherever it is checked out; samples/volcano/ holds the
same bodies for users (tests/test_readme_paths.py keeps the two identical)."""

from __future__ import annotations

import json
from pathlib import Path

SAMPLES = Path(__file__).resolve().parents[1] / "samples"


def sample(verb: str) -> bytes:
    """The sample body of ``verb`` (compact JSON, as Volcano sends it)."""
    return (SAMPLES / f"{verb}.json").read_bytes()


def sample_json(verb: str) -> dict:
    return json.loads(sample(verb))
