"""The ``cluster`` root's facts: the snapshot keeps nodes only when a loaded rule reads a node fact
(asserted on the snapshot the session store holds), the streamed open keeps the same nodes as the
whole decode (taking the nodes kept from predicates as they are), and the facts are the
snapshot's, net of this cycle's allocations and evictions."""

from __future__ import annotations

import io
import json

import msgspec
import orjson
import pytest

from bench.generate import Bodies, Cluster, ClusterSpec, write_snapshot
from policy_extender.fixture_runner.exchange import Exchanger
from policy_extender.policyset.compile import compile_sources
from policy_extender.wire import arriving, decode, node_reuse, open_stream, snapshot
from policy_extender.wire.session_views import NO_SESSION

from tests.support.bodies import SAMPLES

NO_CLUSTER_READ = "filter gpu: node.idle.gpu >= task.requests.gpu\nenqueue cap: job.total_request.gpu <= 16\n"
IDLE_READ = "enqueue research: cluster.idle.gpu >= 4\n    when job.queue_name == \"research\"\n"
FACTS = """\
let a100 = sum(n.idle.gpu for n in cluster.nodes if n.labels["nvidia.com/gpu.product"] == "NVIDIA-A100-SXM4-80GB")
filter facts: false
    reason "idle {cluster.idle.gpu} used {cluster.used.gpu} of {cluster.allocatable.gpu} on {cluster.node_count}; a100 {a100}; here {sum(n.idle.gpu for n in cluster.nodes if n.name == node.name)}; default {cluster.jobs['default'].total} running {cluster.jobs['default'].running} pending {cluster.jobs['default'].pending}; queues {count(keys(cluster.queues))}"
"""


def open_body() -> bytes:
    return orjson.dumps(orjson.loads((SAMPLES / "onSessionOpen.json").read_bytes()))


def stored_snapshot(sources: dict[str, str]) -> tuple[dict, Exchanger]:
    """The snapshot the session store holds after an onSessionOpen of the sample cluster."""
    exchanger = Exchanger(compile_sources(sources))
    exchanger.open_session(open_body())
    store = exchanger.service.sessions
    head = store.head()
    assert head is not None
    snapshot = store.snapshot(head.session_id)
    assert snapshot is not None
    return msgspec.msgpack.decode(snapshot), exchanger


def test_a_set_that_reads_no_cluster_fact_keeps_no_node_in_the_snapshot():
    kept, _ = stored_snapshot({"p.policy": NO_CLUSTER_READ})
    assert set(kept) == {"Jobs", "Queues"}
    kept, _ = stored_snapshot({"p.policy": "ready r: cluster.jobs[\"default\"].total > 0\n"})
    assert set(kept) == {"Jobs", "Queues"}, "job counts need the jobs, not the nodes"


def test_a_set_that_reads_a_node_fact_keeps_each_node_with_the_keys_read_only():
    kept, _ = stored_snapshot({"p.policy": IDLE_READ})
    nodes = kept["Nodes"]
    assert len(nodes) == 6
    assert all(set(node) == {"Name", "Idle"} for node in nodes.values())
    kept, _ = stored_snapshot({"p.policy": FACTS + NO_CLUSTER_READ})
    assert all(set(node) == {"Name", "Idle", "Used", "Allocatable", "Node"} for node in kept["Nodes"].values())
    assert all(set(node["Node"]) == {"metadata"} for node in kept["Nodes"].values())


def _predicate(exchanger: Exchanger, node_name: str) -> str:
    body = json.loads(open_body())
    node = next(n for n in body["Nodes"].values() if n["Name"] == node_name)
    task = next(t for j in body["Jobs"].values() for t in j["Tasks"].values())
    return exchanger.call("predicate", orjson.dumps({"task": task, "node": node}))["status"].split(": ", 1)[1]


def test_the_facts_are_the_snapshots_net_of_this_cycles_allocations_and_evictions():
    _, exchanger = stored_snapshot({"p.policy": FACTS})
    body = json.loads(open_body())
    pending = next(t for j in body["Jobs"].values() if j["Queue"] == "gpu-batch" for t in j["Tasks"].values())
    running = next(t for n in body["Nodes"].values() for t in (n["Tasks"] or {}).values()
                   if t["Name"].startswith("run-0001-worker-0"))  # 1 GPU on node-0000 (an A100)
    # 7 + 4 + 7 idle GPUs, 1 + 1 used, of 8 + 4 + 8; 3 jobs of queue default, 2 running
    facts = "idle 18 used 2 of 20 on 6; a100 7; here {here}; default 3 running 2 pending 1; queues 4"
    assert _predicate(exchanger, "node-0004") == facts.format(here=4)
    exchanger.call("allocateFunc", orjson.dumps({"task": {**pending, "NodeName": "node-0004"}}))
    assert _predicate(exchanger, "node-0004") == facts.replace("idle 18 used 2", "idle 17 used 3").format(here=3)
    exchanger.call("deallocateFunc", orjson.dumps({"task": running}))  # an eviction gives back
    assert _predicate(exchanger, "node-0004") == facts.replace(
        "idle 18 used 2", "idle 18 used 2").replace("a100 7", "a100 8").format(here=3)
    assert _predicate(exchanger, "node-0000") == facts.replace("a100 7", "a100 8").format(here=8)
    exchanger.close_session()
    # no session: no cluster
    decision = compile_sources({"p.policy": FACTS}).predicate(
        decode.decode_predicate(orjson.dumps({"task": pending, "node": body["Nodes"]["node-0000"]})).task,
        decode.decode_predicate(orjson.dumps({"task": pending, "node": body["Nodes"]["node-0000"]})).node,
        NO_SESSION)
    assert decision.reason.endswith("idle 0 used 0 of 0 on 0; a100 0; here 0; default null running null pending null; queues 0")


# ---------------------------------------------------------------- the streamed open keeps the same nodes

CLUSTER_READS = compile_sources({"p.policy": FACTS + NO_CLUSTER_READ}).reads


def _whole(body: bytes) -> bytes:
    return snapshot.encode_snapshot(snapshot.decode_open_body(body, CLUSTER_READS), CLUSTER_READS)


def _streamed(body: bytes, step: int, piece: int) -> tuple[bytes, open_stream.OpenStream]:
    buffer = bytearray(body)
    stream = open_stream.OpenStream(buffer, len(buffer), CLUSTER_READS, piece_bytes=piece, stream_from=0)
    arriving.feed_in_steps(stream, len(buffer), step)
    result = snapshot.encode_snapshot(stream.finish(), CLUSTER_READS)
    assert buffer == body
    return result, stream


@pytest.fixture
def kept_cluster():
    """A 30 x 10 cluster's open body, every node kept by this worker from predicates."""
    node_reuse.configure(node_reuse.DEFAULT_MAX_BYTES)
    cluster = Cluster(ClusterSpec(nodes=30, pods_per_node=10))
    out = io.BytesIO()
    write_snapshot(cluster, out)
    bodies = Bodies(cluster)
    for n in range(30):
        decode.decode_predicate(bodies.predicate(n, 0, 0), CLUSTER_READS)
    yield out.getvalue()
    node_reuse.configure(node_reuse.DEFAULT_MAX_BYTES)


@pytest.mark.parametrize("step,piece", [(1000, 1), (4096, 2000), (100_000, 100)])
def test_the_streamed_open_keeps_the_nodes_of_the_whole_decode(step, piece):
    body = open_body()
    result, stream = _streamed(body, step, piece)
    assert result == _whole(body)
    assert len(msgspec.msgpack.decode(result)["Nodes"]) == 6 and stream.pieces > 0


@pytest.mark.parametrize("step,piece", [(1 << 20, 2 << 20), (65536, 256 << 10), (5000, 1)])
def test_nodes_kept_from_predicates_are_taken_into_the_snapshot(kept_cluster, step, piece):
    result, stream = _streamed(kept_cluster, step, piece)
    assert stream.reused == 30, "every node taken as its predicate decoded it"
    assert result == _whole(kept_cluster)
    nodes = msgspec.msgpack.decode(result)["Nodes"]
    assert len(nodes) == 30 and all("Idle" in node for node in nodes.values())
