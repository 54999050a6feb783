"""The test suite (a package, so test modules import as tests.<area>.<module>)."""

from pathlib import Path

#: One request body per Volcano verb: the bodies of ../shared/samples as compact JSON, the way
#: Volcano sends them. Kept in the repository so the suite runs wherever it is checked out.
SAMPLES = Path(__file__).resolve().parent / "samples"
