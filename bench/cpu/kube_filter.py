"""Where the CPU of kube-scheduler's 1,000-node filter goes, in process:
``python -m bench.cpu.kube_filter [--nodes N] [--rounds R]``.

Prints, on one ``bench.served.kube_scheduler`` filter body (real-shaped v1.Nodes, ~6.8 MB at 1,000):

- the service's WSGI app answering it (``bench.cpu.profile.call``: the app a gunicorn worker serves,
  minus the socket), user and system CPU (``os.times``) over 20 calls, with the garbage collector
  on and off, the median of ``--rounds`` rounds;
- decoding the ``ExtenderArgs`` (``wire.kube``'s decoder) and deciding it (``kube_table.filter_nodes``),
  ``time.process_time`` medians of 15 calls;
- what decoding only what policies read could save: today's decoder, one pruned to what
  ``bench/kube-policies`` reads, names only, and the pod only (the JSON scan floor), medians of 21
  decodes per round.

CPU time, not latency: the machine this runs on may be shared. A script that prints figures, not
a test; BENCHMARKS.md ("kube-scheduler") has the figures and the served ones beside them.
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import tempfile
import time
from typing import Callable

import msgspec

from bench.served.kube_scheduler import FILTER_PATH, KUBE_POLICY_DIR, KubeBodies
from bench.cpu.profile import call
from policy_extender.wire import kube
from policy_extender.wire.structs import Condition, QuantityMap, StrMap, Taint

_O = {"forbid_unknown_fields": False}


class _Meta(msgspec.Struct, **_O):
    name: str | None = None
    labels: StrMap | None = None


class _Spec(msgspec.Struct, **_O):
    unschedulable: bool | None = None
    taints: list[Taint | None] | None = None


class _Status(msgspec.Struct, **_O):
    allocatable: QuantityMap | None = None
    conditions: list[Condition | None] | None = None


class _ReadNode(msgspec.Struct, **_O):
    """A v1.Node pruned to what bench/kube-policies read (not annotations, not capacity)."""
    metadata: _Meta | None = None
    spec: _Spec | None = None
    status: _Status | None = None


class _ReadNodes(msgspec.Struct, **_O):
    items: list[_ReadNode | None] | None = None


class _ReadArgs(msgspec.Struct, **_O):
    Pod: kube.Pod | None = None
    Nodes: _ReadNodes | None = None


class _NameMeta(msgspec.Struct, **_O):
    name: str | None = None


class _NameNode(msgspec.Struct, **_O):
    metadata: _NameMeta | None = None


class _NameNodes(msgspec.Struct, **_O):
    items: list[_NameNode | None] | None = None


class _NameArgs(msgspec.Struct, **_O):
    Pod: kube.Pod | None = None
    Nodes: _NameNodes | None = None


class _PodOnly(msgspec.Struct, **_O):
    Pod: kube.Pod | None = None


def pruned_decoders() -> dict[str, Callable[[bytes], object]]:
    """Today's decoding (``decode_extender_args``: the body with each node kept as sent, then each
    node decoded on its own, since filter answers with the nodes as sent) and three pruned ones,
    each one pass over the body, the pod as today."""
    return {"today's (every field a kube view reads)": kube.decode_extender_args,
            "pruned to bench/kube-policies' reads": msgspec.json.Decoder(_ReadArgs).decode,
            "node names only (the floor of any pruning)": msgspec.json.Decoder(_NameArgs).decode,
            "the pod only (the JSON scan floor)": msgspec.json.Decoder(_PodOnly).decode}


def median_cpu_ms(function: Callable[[], object], calls: int) -> float:
    out = []
    for _ in range(calls):
        start = time.process_time()
        function()
        out.append(time.process_time() - start)
    return statistics.median(out) * 1000


def app_cpu(app, body: bytes, rounds: int, collector: bool) -> tuple[float, float]:
    """(user, system) ms per call, the median over ``rounds`` rounds of 20 calls."""
    (gc.enable if collector else gc.disable)()
    try:
        per_round = []
        for _ in range(rounds):
            before = os.times()
            for _ in range(20):
                call(app, FILTER_PATH, body)
            after = os.times()
            per_round.append(((after.user - before.user) / 20 * 1000, (after.system - before.system) / 20 * 1000))
        return statistics.median(u for u, _ in per_round), statistics.median(s for _, s in per_round)
    finally:
        gc.enable()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.cpu.kube_filter", description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    from policy_extender.config import Config
    from policy_extender.decide.kube_table import filter_nodes
    from policy_extender.policyset import load_directories
    from policy_extender.web import create_app
    from policy_extender.wire.session_views import NO_SESSION

    body = KubeBodies(args.nodes).args()
    print(f"kube-scheduler filter of {args.nodes} nodes, body {len(body) / 1e6:.2f} MB, bench/kube-policies")
    with tempfile.TemporaryDirectory() as tmp:
        app = create_app(Config(policy_dirs=(str(KUBE_POLICY_DIR),), session_store=f"sqlite:{tmp}/s.sqlite3",
                                reload_interval=0.0, log_level="warning"))
        try:
            for _ in range(5):
                call(app, FILTER_PATH, body)
            for collector in (True, False):
                user, system = app_cpu(app, body, args.rounds, collector)
                print(f"  the WSGI app's answer, GC {'on ' if collector else 'off'}: user {user:.1f} ms, system {system:.1f} ms per call")
        finally:
            app.extensions["policy_extender"].stop()
    kube_set = load_directories([str(KUBE_POLICY_DIR)]).for_protocol("kube-scheduler")
    request = kube.decode_extender_args(body, kube_set.reads, NO_SESSION)
    print(f"  decode {median_cpu_ms(lambda: kube.decode_extender_args(body, kube_set.reads, NO_SESSION), 15):.1f} ms, "
          f"decide {median_cpu_ms(lambda: filter_nodes(kube_set, request, NO_SESSION), 15):.1f} ms (medians of 15)")
    figures: dict[str, list[float]] = {}
    for _ in range(args.rounds):  # interleaved: each round measures every decoder
        for name, decode in pruned_decoders().items():
            figures.setdefault(name, []).append(median_cpu_ms(lambda: decode(body), 21))
    for name, values in figures.items():
        print(f"  decoding, {name:45s} {statistics.median(values):5.1f} ms  (rounds: {' '.join(f'{v:.1f}' for v in values)})")


if __name__ == "__main__":
    main()
