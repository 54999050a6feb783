"""``python -m bench.cpu.tally`` runs and prints its method and both figures side by side (a smoke
test with tiny counts: the figures themselves are BENCHMARKS.md's, never asserted)."""

import pytest

from bench.cpu import tally


@pytest.mark.slow
def test_the_tally_benchmark_prints_on_and_off_side_by_side(capsys):
    tally.main(["--calls", "20", "--rounds", "2", "--reject"])
    out = capsys.readouterr().out
    assert "process CPU per call" in out and "paired rounds" in out
    assert "tally on " in out and "tally off " in out
    assert "median of the 2 paired rounds" in out and "(bound: +10 %)" in out
