"""The analysis of the servers' trace lines in ``bench.served.tail`` and ``bench.served.open_breakdown``: which
slow calls overlapped a collection or a metrics flush in their own worker, and the open phases."""

from __future__ import annotations

from bench.served.open_breakdown import breakdown
from bench.served.tail import analyse


def call(pid: int, start: float, seconds: float) -> dict:
    return {"kind": "request", "verb": "predicate", "pid": pid, "start": start, "end": start + seconds,
            "phases": [], "values": {}}


def test_slow_calls_are_matched_to_collections_and_flushes_of_their_own_worker():
    calls = [call(1, t * 0.01, 0.0002) for t in range(300)]
    calls += [call(1, 5.0, 0.02), call(2, 6.0, 0.02), call(1, 7.0, 0.02)]
    events = [{"kind": "gc", "pid": 1, "start": 5.005, "end": 5.015, "generation": 2, "collected": 3},
              {"kind": "gc", "pid": 1, "start": 6.005, "end": 6.006, "generation": 0, "collected": 0},  # other worker
              {"kind": "flush", "pid": 1, "start": 6.99, "end": 7.001}]
    found = analyse(calls + events)
    assert found["slow"] == 3
    assert found["slow_in_gc"] == 1 and found["slow_in_flush"] == 1
    assert found["gc"][2][0] == 1 and abs(found["gc"][2][2] - 0.01) < 1e-9
    assert found["gc"][0][0] == 1 and found["flush"][0] == 1
    assert abs(found["inside_p50"] - 0.0002) < 1e-9


def test_open_phases_from_a_trace_line_and_the_client_times():
    record = {"start": 10.0, "phases": [["received", 10.3], ["decoded", 10.32], ["encoded", 10.321],
                                        ["stored", 10.33], ["replied", 10.331]],
              "values": {"decode_while_receiving": 0.2, "pieces": 125, "nodes_reused": 499}, "end": 10.332}
    got = breakdown(record, sent=9.99, done=10.34)
    assert round(got["before"], 6) == 0.01 and round(got["receive"], 6) == 0.3
    assert round(got["decode"], 6) == 0.02 and round(got["store"], 6) == 0.009
    assert round(got["answer"], 6) == 0.01 and got["pieces"] == 125 and got["overlapped"] == 0.2
    assert got["map_kept"] is None, "no body_map_kept note: the body was not mapped"
    record["values"]["body_map_kept"] = 1.0
    assert breakdown(record, sent=9.99, done=10.34)["map_kept"] == 1.0
    assert got["reused"] == 499


def test_the_report_measures_every_server_against_each_floor_that_ran(capsys):
    from bench.served.open_breakdown import report

    def row(seconds: float) -> dict:
        return {"seconds": seconds, "cpu": seconds, "load": 1.0}

    rounds = [{"floor": row(0.4), "floor-kept": row(0.1), "service": row(0.2)},
              {"floor": row(0.8), "floor-kept": row(0.2), "service": row(0.2)}]
    report(rounds, ["floor", "floor-kept", "service"])
    out = capsys.readouterr().out
    assert "ratio = server / floor of the same round" in out
    assert "ratio = server / floor-kept of the same round" in out
    assert "| 1 | 1.00 | 400 | 100 | 0.25 | 200 | 0.50 |" in out
    assert "| 2 | 1.00 | 200 | 800 | 4.00 | 200 | 1.00 |" in out
    assert "service: slowest open 200 ms; ratio max 2.00" in out  # against floor-kept
