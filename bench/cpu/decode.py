"""Decode timings: ``python -m bench.cpu.decode [--repeat N]``.

Prints the median microseconds to decode a predicate body with ``json.loads``, ``orjson.loads``
and the pruned msgspec decoder (four read sets: the benchmark policy's, ``bench/policies``, among
them), on the sample body and on a synthetic body whose node carries 20 pods (the sample's pods
copied), both as compact JSON like Volcano sends. A script that prints figures, not a test.
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import time
from pathlib import Path

import orjson

from policy_extender.wire.decode import decode_predicate
from policy_extender.wire.structs import full_reads

#: the repository's copy of the shared predicate sample (run from a checkout)
SAMPLE = Path(__file__).resolve().parents[2] / "tests" / "samples" / "predicate.json"
#: the benchmark policy (``python -m bench`` serves it), from a checkout
BENCH_POLICIES = Path(__file__).resolve().parents[2] / "bench" / "policies"

#: What a typical policy reads: ``filter node.labels.zone == task.annotations.zone``,
#: ``filter free_gpu >= task_gpu``.
TYPICAL = {"task": frozenset({("Pod", "metadata", "annotations")}),
           "node": frozenset({("Node", "metadata", "labels"), ("Idle",)})}


def synthetic_body(sample: dict, pods: int = 20) -> bytes:
    """The sample with its node's Tasks copied until the node holds ``pods`` pods."""
    body = copy.deepcopy(sample)
    originals = list(body["node"]["Tasks"].values())
    tasks = {}
    for i in range(pods):
        task = copy.deepcopy(originals[i % len(originals)])
        task["Name"] = task["Pod"]["metadata"]["name"] = f"{task['Name']}-{i}"
        task["UID"] = f"{task['UID'][:-4]}{i:04d}"
        tasks[f"{task['Namespace']}/{task['Name']}"] = task
    body["node"]["Tasks"] = tasks
    return json.dumps(body, separators=(",", ":")).encode()


def median_us(function, body: bytes, repeat: int) -> float:
    function(body)  # warm caches (decoder built once per read set)
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        function(body)
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e6


def contenders() -> dict:
    from policy_extender.policyset import load_directories
    full = full_reads()
    bench = load_directories([BENCH_POLICIES]).reads
    return {
        "json.loads": json.loads,
        "orjson.loads": orjson.loads,
        "msgspec pruned: bench/policies": lambda b: decode_predicate(b, bench),
        "msgspec pruned: typical policy": lambda b: decode_predicate(b, TYPICAL),
        "msgspec pruned: minimal (ALWAYS_READ)": lambda b: decode_predicate(b, {}),
        "msgspec pruned: every schema field": lambda b: decode_predicate(b, full),
    }


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=300)
    parser.add_argument("--pods", type=int, default=20)
    args = parser.parse_args(argv)
    sample = json.loads(SAMPLE.read_bytes())
    bodies = {"sample predicate": json.dumps(sample, separators=(",", ":")).encode(),
              f"synthetic node, {args.pods} pods": synthetic_body(sample, args.pods)}
    for label, body in bodies.items():
        print(f"{label}: {len(body) / 1024:.0f} KiB (median of {args.repeat})")
        for name, function in contenders().items():
            print(f"  {name:40s} {median_us(function, body, args.repeat):9.1f} µs")


if __name__ == "__main__":
    main()
