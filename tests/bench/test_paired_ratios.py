"""``bench.scenarios.paired_ratios``: the service against a baseline checkout, round by round
(``python -m bench --baseline DIR``), as BENCHMARKS.md reports it."""

from bench.scenarios import paired_ratios


def test_the_ratios_are_taken_per_round_then_their_median():
    service = [{"rps": 100.0, "server_cpu_ms": 0.50}, {"rps": 50.0, "server_cpu_ms": 0.90}, {"rps": 90.0, "server_cpu_ms": 0.40}]
    baseline = [{"rps": 100.0, "server_cpu_ms": 0.40}, {"rps": 40.0, "server_cpu_ms": 1.00}, {"rps": 100.0, "server_cpu_ms": 0.40}]
    ratios = paired_ratios(service, baseline)
    assert ratios["paired_rps_vs_baseline"] == 1.0  # rounds 1.0, 1.25, 0.9: a loaded round moves both
    assert (ratios["paired_rps_low"], ratios["paired_rps_high"]) == (0.9, 1.25)
    assert ratios["paired_cpu_vs_baseline"] == 1.0 and ratios["paired_cpu_high"] == 1.25


def test_no_ratio_without_rounds():
    assert paired_ratios([], []) == {}
