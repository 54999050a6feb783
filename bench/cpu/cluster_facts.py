"""What reading the ``cluster`` root costs besides the onSessionOpen itself (which
``bench.served.open_breakdown``'s ``service`` / ``service-cluster`` measure served):
``python -m bench.cpu.cluster_facts [--nodes 500 --pods 30] [--repeat 5]``.

In process, on a generated cluster (``bench.generate``, Volcano's shape), with two read sets:
``bench/policies`` alone (reads no cluster fact) and with the research queue policy and a rule on
``cluster.jobs`` (``bench.served.open_breakdown.CLUSTER_RULES``). For each, the median over ``--repeat``
runs of: the whole pruned decode and the snapshot's encoding (what an open does when its body was
not decoded while it arrived), the snapshot's size (what the session store holds), a worker's
load of it (``load_snapshot``, once per session and worker), the facts computed on first use
(``ClusterFacts``, its node sums and its job counts: each once per snapshot and worker, when
first read), and a ``cluster`` view net of 100 nodes' worth
of allocations read for ``idle.gpu`` and an aggregate over the nodes (once per picture of the
session, i.e. after each allocation), by the counts alone and with the 100 tasks placed on their
nodes (their nodes list them, and every node is seen through the picture). A script that prints figures, not a test.
"""

from __future__ import annotations

import argparse
import io
import statistics
import tempfile
import time
from pathlib import Path

from bench.generate import Cluster, ClusterSpec, write_snapshot
from bench.served.open_breakdown import cluster_policies
from policy_extender.policyset.compile import load_directories
from policy_extender.wire import snapshot
from policy_extender.wire.resources import Counts, Resources
from policy_extender.wire.session_views import NO_PLACEMENTS, AllocationView, Placements

ROOT = Path(__file__).resolve().parents[2]


def median_ms(function, repeat: int) -> tuple[float, object]:
    times, result = [], None
    for _ in range(repeat):
        started = time.perf_counter()
        result = function()
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1000, result


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=500)
    parser.add_argument("--pods", type=int, default=30)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    out = io.BytesIO()
    write_snapshot(Cluster(ClusterSpec(nodes=args.nodes, pods_per_node=args.pods)), out)
    body = out.getvalue()
    with tempfile.TemporaryDirectory() as tmp:
        sets = {"bench/policies (no cluster fact)": load_directories([ROOT / "bench" / "policies"]).reads,
                "with cluster facts": load_directories([Path(cluster_policies(tmp))]).reads}
    print(f"method: bench/cpu/cluster_facts.py, {args.nodes} x {args.pods} onSessionOpen of {len(body) / 1e6:.1f} MB, "
          f"in process, median of {args.repeat}")
    for label, reads in sets.items():
        decode_ms, pruned = median_ms(lambda: snapshot.decode_open_body(body, reads), args.repeat)
        encode_ms, data = median_ms(lambda: snapshot.encode_snapshot(pruned, reads), args.repeat)
        load_ms, loaded = median_ms(lambda: snapshot.load_snapshot(data), args.repeat)
        def computed():
            facts = snapshot.load_snapshot(data).cluster_facts()
            return facts, facts.totals, facts.jobs
        facts_ms, (facts, _, _) = median_ms(computed, args.repeat)
        facts_ms -= load_ms
        moved = {node.name: Counts(1, {"nvidia.com/gpu": 1}) for node in facts.nodes[:100]}

        def read():
            view = facts.view(moved)
            return view.idle.gpu, sum(n.idle.gpu for n in view.nodes if n.labels.get("pool") == "a100")
        view_ms, _ = median_ms(read, args.repeat)
        # the same 100 allocations as tasks placed on their nodes: each of those nodes lists its
        # task, and every node is seen through the session's picture (its tasks' jobs are net too)
        placed = Placements(AllocationView(f"t{i}", "job", "q", node.name, Resources({"nvidia.com/gpu": 1}), i,
                                           {"UID": f"t{i}", "Status": 2})
                            for i, node in enumerate(facts.nodes[:100]))

        def read_placed():
            view = facts.view(moved, placed, NO_PLACEMENTS, loaded)
            return view.idle.gpu, sum(n.idle.gpu for n in view.nodes if n.labels.get("pool") == "a100")
        placed_ms, _ = median_ms(read_placed, args.repeat)
        print(f"  {label}: decode {decode_ms:.0f} ms, encode {encode_ms:.1f} ms, snapshot {len(data) / 1e6:.2f} MB "
              f"({len(loaded.nodes or {})} nodes kept), load {load_ms:.1f} ms, facts {facts_ms:.1f} ms, "
              f"a view after allocations on 100 nodes {view_ms:.2f} ms, the same with their 100 tasks "
              f"placed on the nodes {placed_ms:.2f} ms")


if __name__ == "__main__":
    main()
