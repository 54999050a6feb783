"""The bundled fixture files with values of their cases replaced or deleted (small profile;
``python -m tests.tools.fixture_fuzz --files 2000`` is the long run): nothing escapes the fixture
runner and no case errors with "internal error" (docs/reliability.md, "Found and fixed", 7)."""

from __future__ import annotations

import pytest

from tests.tools import fixture_fuzz


@pytest.mark.slow
def test_mutated_fixtures_error_where_the_value_is_never_internally():
    outcomes, failures = fixture_fuzz.run(150, seed=1)
    assert not failures, [(f["file"], f["message"]) for f in failures[:3]]
    assert outcomes["ERROR"] > 0 and outcomes["PASS"] > 0, outcomes  # bad values met, good cases still pass
