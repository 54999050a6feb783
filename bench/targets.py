"""The targets the runner reports against, each PASS/MISS with the measured value.

Targets (2 cores, client on the same machine):

* predicate at 20 pods/node: >= 70 % of the bare-WSGI floor's requests/s, p99 <= 10 ms at 16 clients;
* policy engine <= +20 % server CPU per predicate over the hand-written baseline (same decoding);
* onSessionOpen 500x30 answered in <= 1 s with peak RSS growth <= 1.5x the body size;
* prioritize over 50 nodes at 20 pods/node: p50 <= 25 ms.
"""

from __future__ import annotations

from typing import Callable


def find(rows: list[dict], **match) -> dict | None:
    for row in rows:
        if all(row.get(k) == v for k, v in match.items()):
            return row
    return None


Target = tuple[str, Callable[[list[dict]], "tuple[float, bool] | None"], str]


def _ratio(rows, scenario, key, base) -> tuple[float, float] | None:
    service, other = find(rows, scenario=scenario, server="service"), find(rows, scenario=scenario, server=base)
    if not service or not other or not other.get(key):
        return None
    return service[key], other[key]


def rps_vs_bare(rows):
    pair = _ratio(rows, "predicate-20", "rps", "bare")
    return None if pair is None else (pair[0] / pair[1], pair[0] / pair[1] >= 0.70)


def predicate_p99(rows):
    row = find(rows, scenario="predicate-20", server="service")
    return None if row is None else (row["p99_ms"], row["p99_ms"] <= 10.0)


def cpu_vs(base: str):
    def check(rows):
        pair = _ratio(rows, "predicate-20", "server_cpu_ms", base)
        return None if pair is None else (pair[0] / pair[1] - 1, pair[0] / pair[1] <= 1.20)
    return check


def open_seconds(rows):
    row = find(rows, scenario="open-500x30", server="service")
    return None if row is None else (row["seconds"], row["seconds"] <= 1.0)


def open_rss(rows):
    row = find(rows, scenario="open-500x30", server="service")
    return None if row is None else (row["rss_growth_vs_body"], row["rss_growth_vs_body"] <= 1.5)


def prioritize_p50(rows):
    row = find(rows, scenario="prioritize-50", server="service")
    return None if row is None else (row["p50_ms"], row["p50_ms"] <= 25.0)


TARGETS: list[Target] = [
    ("predicate 50x20: service req/s >= 70 % of bare WSGI", rps_vs_bare, "{:.0%} of bare"),
    ("predicate 50x20: service p99 <= 10 ms at 16 clients", predicate_p99, "{:.1f} ms"),
    ("predicate 50x20: engine CPU/request <= +20 % over hand-written Flask", cpu_vs("handwritten"), "{:+.0%}"),
    ("predicate 50x20: engine CPU/request <= +20 % over hand-written WSGI", cpu_vs("handwritten-wsgi"), "{:+.0%}"),
    ("onSessionOpen 500x30 answered <= 1 s", open_seconds, "{:.2f} s"),
    ("onSessionOpen 500x30 peak RSS growth <= 1.5x body", open_rss, "{:.2f}x body"),
    ("prioritize 50 nodes x 20 pods: p50 <= 25 ms", prioritize_p50, "{:.1f} ms"),
]


def report(rows: list[dict]) -> list[str]:
    lines = []
    for name, check, fmt in TARGETS:
        outcome = check(rows)
        if outcome is None:
            lines.append(f"  ----  {name}: not measured in this run")
        else:
            value, ok = outcome
            lines.append(f"  {'PASS' if ok else 'MISS'}  {name}: {fmt.format(value)}")
    return lines
