"""The test suite (a package, so test modules import as tests.<area>.<module>)."""

from pathlib import Path

#: One request body per Volcano verb, as compact JSON, the way Volcano sends them. Kept in the
#: repository so the suite runs wherever it is checked out; samples/volcano/ holds the same bodies
#: for users (tests/test_readme_paths.py keeps the two identical).
SAMPLES = Path(__file__).resolve().parent / "samples"
