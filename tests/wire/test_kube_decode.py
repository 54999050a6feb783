"""kube-scheduler's extender bodies decoded into views, and its answers encoded (wire/kube.py,
wire/kube_encode.py).

The bodies in tests/wire/kube/ are one per verb in the shape kube-scheduler's HTTPExtender sends
them with ``nodeCacheCapable: false`` (Go's ``encoding/json`` of ``ExtenderArgs`` and
``ExtenderPreemptionArgs``: wrapper keys are Go names, the v1.Pod / v1.Node inside are whole, with
managedFields, images, nodeInfo, a pod's volumes and status). The values expected here are read
off those files by hand.
"""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import pytest

from policy_extender import schema
from policy_extender.decide.kube_table import kube_score
from policy_extender.errors import WireError
from policy_extender.wire import kube, kube_encode
from policy_extender.wire.encode import EncodeError

BODIES = Path(__file__).resolve().parent / "kube"
GIB = 2**30


def body(verb: str) -> bytes:
    return (BODIES / f"{verb}.json").read_bytes()


def edited(verb: str, change) -> bytes:
    document = json.loads(body(verb))
    change(document)
    return json.dumps(document).encode()


#: what kube-scheduler sends of each type (kube-spec.md): the views expose these and no other field
SENT = {
    "task": {"uid", "name", "namespace", "labels", "annotations", "priority", "priority_class", "requests",
             "init_requests", "node_selector", "tolerations", "best_effort", "node_name"},
    "node": {"name", "labels", "annotations", "taints", "unschedulable", "conditions", "ready", "allocatable",
             "capacity"},
}


def public_fields(view_class: type) -> set[str]:
    return {name for cls in view_class.__mro__ for name, value in vars(cls).items()
            if isinstance(value, property) and not name.startswith("_")}


@pytest.mark.parametrize("kind, view", [("task", kube.KubePodView), ("node", kube.KubeNodeView)])
def test_a_view_exposes_exactly_the_schema_fields_kube_scheduler_sends(kind, view):
    assert public_fields(view) == SENT[kind]
    assert SENT[kind] <= set(schema.TYPES[kind])  # each with the language's name and type


@pytest.mark.parametrize("verb", ["filter", "prioritize"])
def test_the_pod_of_extender_args_reads_as_a_task(verb):
    pod = kube.decode_extender_args(body(verb)).task
    assert (pod.uid, pod.name, pod.namespace) == ("8a4f2c1e-5b7d-4e3a-9c1f-2d6e8b0a4c11", "train-7d9f-x2x4q", "ml")
    assert pod.labels == {"app": "train", "team": "vision"}
    assert pod.annotations == {"scheduling.example.com/zone": "us-east1-b"}
    assert (pod.priority, pod.priority_class, pod.node_name) == (1000, "batch-high", "")
    assert pod.node_selector == {"kubernetes.io/os": "linux"}
    assert [(t.key, t.operator, t.effect) for t in pod.tolerations] == [
        ("nvidia.com/gpu", "Exists", "NoSchedule"), ("node.kubernetes.io/not-ready", "Exists", "NoExecute"),
        ("node.kubernetes.io/unreachable", "Exists", "NoExecute")]
    # requests: main 1500m + sidecar 100m + overhead 250m; memory 1Gi + 64Mi + "1e3" bytes of overhead
    assert pod.requests.as_dict() == {"cpu": 1.85, "memory": GIB + 64 * 2**20 + 1000, "nvidia.com/gpu": 1}
    # init_requests: the init container's 4 cores beat the containers' 1.6; its 512Mi does not
    assert pod.init_requests.as_dict() == {"cpu": 4.25, "memory": GIB + 64 * 2**20 + 1000, "nvidia.com/gpu": 1}
    assert pod.requests.gpu == 1 and pod.best_effort is False  # "1" is one GPU: no milli units


def test_the_nodes_of_extender_args_read_as_nodes_in_the_order_sent():
    nodes = kube.decode_extender_args(body("filter")).nodes
    assert [n.name for n in nodes] == ["gpu-b-1", "gpu-c-1", "cpu-b-1", "gpu-b-2"]
    first, cpu, not_ready = nodes[0], nodes[2], nodes[3]
    assert first.labels["topology.kubernetes.io/zone"] == "us-east1-b"
    assert first.annotations == {"node.alpha.kubernetes.io/ttl": "0",
                                 "volumes.kubernetes.io/controller-managed-attach-detach": "true"}
    assert [(t.key, t.value, t.effect) for t in first.taints] == [("nvidia.com/gpu", "present", "NoSchedule")]
    assert first.conditions == {"MemoryPressure": "False", "DiskPressure": "False", "Ready": "True"}
    assert (first.ready, not_ready.ready, first.unschedulable) == (True, False, False)
    assert (first.allocatable.cpu, first.allocatable.gpu, first.allocatable.memory, first.allocatable.pods) == \
        (15.89, 8, 62 * GIB, 110)
    assert (first.capacity.cpu, first.capacity.memory) == (16, 65851340 * 1024)
    assert cpu.allocatable.memory == 60129542144 and cpu.allocatable.gpu == 0 and cpu.taints == []
    assert cpu.allocatable["ephemeral-storage"] == 95551679124


def test_what_the_views_never_read_is_skipped_whatever_it_holds():
    """managedFields, images, nodeInfo, a pod's status and volumes are not decoded: garbage there
    changes nothing (msgspec skips them)."""
    def spoil(document):
        for node in document["Nodes"]["items"]:
            node["metadata"]["managedFields"] = "not a list"
            node["status"]["images"] = {"not": "a list"}
            node["status"]["nodeInfo"] = 7
        document["Pod"]["status"] = ["not", "an", "object"]
        document["Pod"]["spec"]["volumes"] = "x"
    spoiled = kube.decode_extender_args(edited("filter", spoil))
    plain = kube.decode_extender_args(body("filter"))
    assert [n.allocatable for n in spoiled.nodes] == [n.allocatable for n in plain.nodes]
    assert spoiled.task.requests == plain.task.requests


@pytest.mark.parametrize("text, whole", [("500m", 0.5), ("1Gi", GIB), ("1e3", 1000), ("2", 2), ("1.5", 1.5),
                                         ("100Mi", 100 * 2**20), ("3k", 3000)])
def test_kubernetes_quantities_are_whole_units(text, whole):
    def set_cpu(document):
        document["Nodes"]["items"][0]["status"]["allocatable"]["cpu"] = text
    assert kube.decode_extender_args(edited("filter", set_cpu)).nodes[0].allocatable.cpu == whole


@pytest.mark.parametrize("where, path", [
    (lambda d: d["Nodes"]["items"][1]["status"]["allocatable"].__setitem__("cpu", "5 cores"),
     "$.Nodes.items[1].status.allocatable.cpu"),
    (lambda d: d["Nodes"]["items"][0]["status"]["capacity"].__setitem__("nvidia.com/gpu", "two"),
     "$.Nodes.items[0].status.capacity['nvidia.com/gpu']"),
    (lambda d: d["Pod"]["spec"]["containers"][0]["resources"]["requests"].__setitem__("memory", "1GB"),
     "$.Pod.spec.containers[0].resources.requests.memory"),
    (lambda d: d["Pod"]["spec"]["overhead"].__setitem__("cpu", True), "$.Pod.spec.overhead.cpu"),
])
def test_a_bad_quantity_is_refused_naming_its_field(where, path):
    with pytest.raises(WireError) as refused:
        kube.decode_extender_args(edited("filter", where))
    assert refused.value.path == path
    assert "Kubernetes quantity" in refused.value.message or "expected" in refused.value.message


def test_a_bad_quantity_of_a_victim_is_refused_naming_its_field():
    def spoil(document):
        document["NodeNameToVictims"]["gpu-b-2"]["Pods"][0]["spec"]["containers"][1]["resources"]["requests"]["cpu"] = "x"
    with pytest.raises(WireError) as refused:
        kube.decode_preemption_args(edited("preempt", spoil))
    assert refused.value.path == "$.NodeNameToVictims['gpu-b-2'].Pods[0].spec.containers[1].resources.requests.cpu"


@pytest.mark.parametrize("change, path", [
    (lambda d: d.pop("Pod"), "$.Pod"),
    (lambda d: d.__setitem__("Pod", None), "$.Pod"),
    (lambda d: d.pop("Nodes"), "$.Nodes"),
    (lambda d: d["Nodes"]["items"][2]["metadata"].pop("name"), "$.Nodes.items[2].metadata.name"),
    (lambda d: d["Pod"]["spec"].__setitem__("priority", "high"), "$.Pod.spec.priority"),
])
def test_a_body_without_what_kube_scheduler_always_sends_is_refused(change, path):
    with pytest.raises(WireError) as refused:
        kube.decode_extender_args(edited("filter", change))
    assert refused.value.path == path


@pytest.mark.parametrize("text", [b"", b"{", b"[]", b"null", b'{"Pod": 3}'])
def test_what_is_not_extender_args_is_refused(text):
    with pytest.raises(WireError):
        kube.decode_extender_args(text)


def test_node_names_only_is_a_node_cache_capable_extender_and_refused():
    def names_only(document):
        document["NodeNames"] = [n["metadata"]["name"] for n in document.pop("Nodes")["items"]]
    with pytest.raises(kube.NodeCacheRefused) as refused:
        kube.decode_extender_args(edited("filter", names_only))
    assert "nodeCacheCapable: true" in str(refused.value) and "set nodeCacheCapable: false" in str(refused.value)

    def meta_only(document):
        document["NodeNameToMetaVictims"] = {node: {"Pods": [{"UID": p["metadata"]["uid"]} for p in v["Pods"]],
                                                    "NumPDBViolations": 0}
                                             for node, v in document.pop("NodeNameToVictims").items()}
    with pytest.raises(kube.NodeCacheRefused):
        kube.decode_preemption_args(edited("preempt", meta_only))


def test_preemption_args_read_per_node_with_uids_and_pdb_violations():
    request = kube.decode_preemption_args(body("preempt"))
    assert request.evictor.name == "train-7d9f-x2x4q" and request.evictor.priority == 1000
    assert [(n.node, n.uids, n.pdb_violations) for n in request.nodes] == [
        ("gpu-b-1", ["1c0ffee0-0000-4000-8000-000000000001", "1c0ffee0-0000-4000-8000-000000000002"], 1),
        ("gpu-b-2", ["1c0ffee0-0000-4000-8000-000000000003"], 0)]
    victim = request.nodes[1].pods[0]
    assert (victim.priority, victim.node_name, victim.annotations) == \
        (5000, "gpu-b-2", {"scheduling.example.com/protected": "true"})
    assert victim.requests.as_dict() == {"cpu": 2.1, "memory": 64 * 2**20, "nvidia.com/gpu": 1}


def test_a_victim_without_a_uid_is_refused():
    def spoil(document):
        document["NodeNameToVictims"]["gpu-b-1"]["Pods"][1]["metadata"].pop("uid")
    with pytest.raises(WireError) as refused:
        kube.decode_preemption_args(edited("preempt", spoil))
    assert refused.value.path == "$.NodeNameToVictims['gpu-b-1'].Pods[1].metadata.uid"


# ---------------------------------------------------------------------------------------------
# answers (Go field names, ints as ints, maps and lists never null where kube-scheduler indexes them)


class NodeList(msgspec.Struct, forbid_unknown_fields=True):
    metadata: dict
    items: list[dict]


class FilterResult(msgspec.Struct, forbid_unknown_fields=True):
    """``ExtenderFilterResult`` (extender/v1/types.go), every field as kube-scheduler reads it."""

    Nodes: NodeList
    NodeNames: None
    FailedNodes: dict[str, str]
    FailedAndUnresolvableNodes: dict[str, str]
    Error: str


class HostPriority(msgspec.Struct, forbid_unknown_fields=True):
    Host: str
    Score: int


class MetaPod(msgspec.Struct, forbid_unknown_fields=True):
    UID: str


class MetaVictims(msgspec.Struct, forbid_unknown_fields=True):
    Pods: list[MetaPod]
    NumPDBViolations: int


class PreemptionResult(msgspec.Struct, forbid_unknown_fields=True):
    NodeNameToMetaVictims: dict[str, MetaVictims]


def test_the_filter_answer_is_an_extender_filter_result():
    answer = msgspec.json.decode(kube_encode.filter_result(["a", "c"], {"b": "zone"}, {"d": "no GPU"}),
                                 type=FilterResult)
    assert [item["metadata"] for item in answer.Nodes.items] == [{"name": "a"}, {"name": "c"}]
    assert (answer.FailedNodes, answer.FailedAndUnresolvableNodes, answer.Error) == ({"b": "zone"}, {"d": "no GPU"}, "")
    empty = msgspec.json.decode(kube_encode.filter_result([], {}, {}), type=FilterResult)
    assert (empty.Nodes.items, empty.FailedNodes, empty.FailedAndUnresolvableNodes) == ([], {}, {})
    failed = msgspec.json.decode(kube_encode.filter_error("boom"), type=FilterResult)
    assert failed.Error == "boom" and failed.Nodes.items == []


def test_the_prioritize_answer_is_a_host_priority_list_of_ints():
    answer = msgspec.json.decode(kube_encode.host_priorities({"a": 10, "b": 0, "c": 3}), type=list[HostPriority])
    assert answer == [HostPriority("a", 10), HostPriority("b", 0), HostPriority("c", 3)]
    assert kube_encode.host_priorities({}) == b"[]"
    for bad in (11, -1, 2.5, True):
        with pytest.raises(EncodeError):
            kube_encode.host_priorities({"a": bad})


def test_the_preempt_answer_names_victims_by_uid_and_leaves_out_a_node_with_none():
    answer = msgspec.json.decode(kube_encode.preemption_result({"a": (["u1", "u2"], 2), "b": ([], 0)}),
                                 type=PreemptionResult)
    assert answer.NodeNameToMetaVictims == {"a": MetaVictims([MetaPod("u1"), MetaPod("u2")], 2)}
    assert kube_encode.preemption_result({}) == b'{"NodeNameToMetaVictims":{}}'


@pytest.mark.parametrize("total, score", [(0, 0), (2.5, 3), (2.4999, 2), (3.5, 4), (9.5, 10), (10, 10),
                                          (17.2, 10), (-3, 0), (float("inf"), 10), (float("-inf"), 0),
                                          (float("nan"), 0), (0.5, 1), (7.49, 7)])
def test_a_total_score_is_clamped_to_0_10_and_rounded_half_up(total, score):
    assert kube_score(total) == score and isinstance(kube_score(total), int)


def test_one_amount_read_off_a_resource_list_is_the_amount_of_the_whole_list():
    """The compiler reads ``node.allocatable.gpu`` through ``raw_amount_reader`` (or ``amount``),
    parsing one quantity; every way gives what the whole ``Resources`` gives."""
    for node in kube.decode_extender_args(body("filter")).nodes:
        for field in ("allocatable", "capacity"):
            read = kube.KubeNodeView.raw_amount_reader(field, "nvidia.com/gpu")
            assert read is not None and read(node.raw) == node.amount(field, "nvidia.com/gpu") == getattr(node, field).gpu
            for name in ("cpu", "memory", "pods", "ephemeral-storage", "hugepages-2Mi", "example.com/none"):
                whole = getattr(node, field)[name]
                assert kube.KubeNodeView.raw_amount_reader(field, name)(node.raw) == node.amount(field, name) == whole
    assert kube.KubeNodeView.raw_amount_reader("labels", "cpu") is None
