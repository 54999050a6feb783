"""The scheduling cycle the replay tests record (every verb once, a predicate per node of the
sample snapshot) and the policies they record and replay it under."""

from __future__ import annotations

import json

from tests.support.bodies import sample

ZONE = "topology.kubernetes.io/zone"
#: The sample snapshot's nodes and their zones.
NODE_ZONES = {"node-0000": "zone-c", "node-0001": "zone-c", "node-0002": "zone-a",
              "node-0003": "zone-a", "node-0004": "zone-a", "node-0005": "zone-b"}

RECORDED = {"cycle.policy": """\
filter schedulable: not node.unschedulable
score gpu: 10 * free_gpu
enqueue gang-enqueue: job.min_available <= 3
ready gang-ready: job.ready_tasks >= job.min_available
victim low: evictee.priority < evictor.priority
"""}

#: RECORDED plus a zone filter: flips exactly the nodes outside zone-a.
ZONE_ADDED = {"cycle.policy": RECORDED["cycle.policy"], "zone.policy": f"""\
filter zone-a-only: node.labels["{ZONE}"] == "zone-a"
  reason "only zone-a"
"""}


def cycle_calls() -> list[tuple[str, bytes]]:
    """One cycle as Volcano sends it: open, a predicate per node, prioritize, an allocation,
    the other decisions, close."""
    snapshot = json.loads(sample("onSessionOpen"))
    predicate = json.loads(sample("predicate"))
    calls = [("onSessionOpen", sample("onSessionOpen"))]
    calls += [("predicate", json.dumps({**predicate, "node": node}).encode())
              for node in snapshot["Nodes"].values()]
    calls += [(verb, sample(verb)) for verb in (
        "prioritize", "allocateFunc", "jobEnqueueable", "queueOverused", "jobReady",
        "preemptable", "reclaimable", "deallocateFunc", "onSessionClose")]
    return calls
