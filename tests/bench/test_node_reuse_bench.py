"""``python -m bench.cpu.node_reuse`` runs and prints its method and the three figures (a smoke test
with tiny counts: the figures themselves are BENCHMARKS.md's, never asserted), and leaves the
process's node reuse as the service's default."""

from bench.cpu import node_reuse as bench
from policy_extender.wire import node_reuse


def test_the_node_reuse_benchmark_prints_off_miss_and_hit(capsys):
    bench.main(["--nodes", "4", "--rounds", "1"])
    out = capsys.readouterr().out
    assert out.startswith("method: bench/cpu/node_reuse.py: decode_predicate only, 4 bodies")
    for row in ("off ", "miss ", "hit "):
        assert f"  {row}" in out and "us per call" in out
    assert "kept after a pass:" in out
    assert node_reuse._max_bytes == node_reuse.DEFAULT_MAX_BYTES and node_reuse.kept_bytes() > 0


def test_the_prioritize_variant_prints_its_method_and_rows(capsys):
    bench.main(["--verb", "prioritize", "--nodes", "4", "--rounds", "1"])
    out = capsys.readouterr().out
    assert out.startswith("method: bench/cpu/node_reuse.py: decode_prioritize only, one body of 4 nodes")
    assert all(f"  {row}" in out for row in ("off ", "miss ", "hit "))


def test_the_streamed_prioritize_variant_runs_and_restores_the_default_bound(capsys):
    bench.main(["--verb", "prioritize", "--streamed", "--nodes", "4", "--rounds", "1"])
    out = capsys.readouterr().out
    assert "pods (0.1 MB), streamed," in out or ", streamed, bench/policies" in out
    assert all(f"  {row}" in out for row in ("off ", "miss ", "hit "))
    assert node_reuse._max_bytes == node_reuse.DEFAULT_MAX_BYTES
