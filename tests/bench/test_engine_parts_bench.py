"""``python -m bench.cpu.engine_parts`` runs and prints each part of a predicate call (a smoke test
with tiny counts: the figures are BENCHMARKS.md's, never asserted)."""

import re

import pytest

from bench.cpu import engine_parts


@pytest.mark.slow
def test_the_engine_parts_benchmark_prints_every_part(capsys):
    engine_parts.main(["--number", "20", "--repeat", "1"])
    out = capsys.readouterr().out
    assert out.startswith("predicate, 50 nodes x 20 pods/node (")
    rows = dict(re.findall(r"^  (.+?)\s+(\d+\.\d+) us$", out, re.M))
    assert {"whole call: service", "whole call: hand-written", "rules: hand-written", "rules: policy evaluation",
            "decision tally", "metrics", "request id", "session head + pinned set"} <= set(rows)
    assert all(float(v) > 0 for v in rows.values())
