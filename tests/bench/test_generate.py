"""The generator's bodies have the shape of the real ones in tests/samples (the shared samples as compact JSON).

Shape = the set of key paths, with map keys (node names, task UIDs, label names...) and list
indexes replaced by ``*``. Volcano's own structs must match the samples exactly; embedded
Kubernetes objects (Pod, Node, PodGroup, Queue) may carry more (``managedFields``, taints).
"""

import json

import pytest

from bench.generate import Bodies, Cluster, ClusterSpec

from tests.support.bodies import SAMPLES
K8S_OBJECTS = {"Pod", "Node", "PodGroup", "Queue"}
MAPS = {"Jobs", "Nodes", "RevocableNodes", "Queues", "NamespaceInfo", "Tasks", "SubJobs", "TaskToSubJob", "ImageStates",
        "ScalarResources", "labels", "annotations", "PodAnnotations", "QuotaStatus", "NodesFitErrors", "TaskMinAvailable",
        "minTaskMember", "capacity", "allocatable", "limits", "requests", "hard", "used", "capability", "minResources",
        "allocated", "ResMap", "MinSubJobs", "fieldsV1"}


def shape(value, path=()) -> set[tuple]:
    paths = {path}
    if isinstance(value, dict):
        is_map = path and (path[-1] in MAPS or path[-2:] == ("TaskStatusIndex", "*") or path[-1] == "TaskStatusIndex")
        for key, item in value.items():
            paths |= shape(item, path + ("*" if is_map else key,))
    elif isinstance(value, list):
        for item in value:
            paths |= shape(item, path + ("*",))
    return paths


def volcano_level(paths: set[tuple]) -> set[tuple]:
    return {p for p in paths if not K8S_OBJECTS & set(p)}


@pytest.fixture(scope="module")
def bodies() -> Bodies:
    return Bodies(Cluster(ClusterSpec(nodes=4, pods_per_node=4, pending_jobs=2, tasks_per_pending_job=2, running_job_size=2)))


BODY_FOR_SAMPLE = {
    "predicate": lambda b: b.predicate(1),
    "prioritize": lambda b: b.prioritize(),
    "preemptable": lambda b: b.victims(),
    "reclaimable": lambda b: b.victims(node=2),
    "jobEnqueueable": lambda b: b.job(),
    "jobEnqueued": lambda b: b.job(1),
    "jobReady": lambda b: b.job(0, status=2),
    "queueOverused": lambda b: b.queue("default"),
    "allocateFunc": lambda b: b.allocate(),
    "deallocateFunc": lambda b: b.allocate(1, 1, node=3),
    "onSessionOpen": lambda b: b.snapshot(),
    "onSessionClose": lambda b: b.close(),
}


@pytest.mark.parametrize("verb", sorted(BODY_FOR_SAMPLE))
def test_body_has_the_samples_shape(bodies, verb):
    sample = shape(json.loads((SAMPLES / f"{verb}.json").read_text()))
    generated = shape(json.loads(BODY_FOR_SAMPLE[verb](bodies)))
    assert sample - generated == set(), f"keys the samples have and the generator lacks: {sorted(sample - generated)[:10]}"
    extra = volcano_level(generated) - volcano_level(sample)
    assert extra == set(), f"Volcano-level keys the samples do not have: {sorted(extra)[:10]}"


def test_bodies_are_deterministic_by_seed():
    spec = ClusterSpec(nodes=3, pods_per_node=4, pending_jobs=1)
    assert Bodies(Cluster(spec)).predicate(2) == Bodies(Cluster(spec)).predicate(2)
    other = ClusterSpec(nodes=3, pods_per_node=4, pending_jobs=1, seed=2)
    assert Bodies(Cluster(spec)).predicate(2) != Bodies(Cluster(other)).predicate(2)


def test_running_tasks_appear_on_their_node_and_in_their_job(bodies):
    snapshot = json.loads(bodies.snapshot())
    on_nodes = {t["UID"]: t for n in snapshot["Nodes"].values() for t in n["Tasks"].values() if t["Job"]}
    in_jobs = {uid: t for j in snapshot["Jobs"].values() for uid, t in j["Tasks"].items() if t["Status"] == 32}
    assert on_nodes and on_nodes == in_jobs
    for job in snapshot["Jobs"].values():
        sub = job["SubJobs"][job["UID"]]
        assert sub["Tasks"] == job["Tasks"]
        assert {u for by_status in job["TaskStatusIndex"].values() for u in by_status} == set(job["Tasks"])


def test_node_idle_is_allocatable_minus_what_its_pods_request(bodies):
    node = json.loads(bodies.predicate(0))["node"]
    used_gpu = sum((t["Resreq"]["ScalarResources"] or {}).get("nvidia.com/gpu", 0) for t in node["Tasks"].values())
    alloc_gpu = node["Allocatable"]["ScalarResources"].get("nvidia.com/gpu", 0)
    assert node["Idle"]["ScalarResources"].get("nvidia.com/gpu", 0) == alloc_gpu - used_gpu
    assert node["Idle"]["MilliCPU"] == node["Allocatable"]["MilliCPU"] - sum(t["Resreq"]["MilliCPU"] for t in node["Tasks"].values())


def test_handwritten_baseline_decides_like_the_benchmark_policy():
    """The baseline is only a baseline if it implements the same rules as bench/policies."""
    from bench import handwritten
    from bench.server import POLICY_DIR
    from policy_extender.policyset import compile_sources
    from policy_extender.wire import decode as wire

    policy = compile_sources({p.name: p.read_text() for p in POLICY_DIR.glob("*.policy")})
    bodies = Bodies(Cluster(ClusterSpec(nodes=9, pods_per_node=6, pending_jobs=4)))
    outcomes = set()
    for p in range(4):
        for i in range(9):
            body = bodies.predicate(i, p)
            req = wire.decode_predicate(body, policy.reads)
            engine = policy.predicate(req.task, req.node, req.task.env)
            hand = json.loads(handwritten.predicate(body))
            assert (engine.fits, engine.code) == (hand["status"] == "", hand["code"]), (p, i, engine, hand)
            outcomes.add(engine.code)
        req = wire.decode_prioritize(bodies.prioritize(p=p), policy.reads)
        hand = json.loads(handwritten.prioritize(bodies.prioritize(p=p)))["nodeScore"]
        assert policy.prioritize(req.task, req.nodes, req.task.env).scores == hand
    assert outcomes >= {0, 3}, "the bodies should exercise both fitting and zone-rejected nodes"
