"""Every sample body decodes, views give normalised values, errors carry paths, pruning prunes."""

import json
import re

import msgspec
import pytest

from policy_extender.wire.decode import (decode_job, decode_predicate, decode_prioritize,
                                         decode_queue, decode_session_close, decode_task_event,
                                         decode_victims)
from policy_extender.errors import WireError
from policy_extender.wire.snapshot import decode_session_open
from policy_extender.policyset import compile_sources
from policy_extender.wire.paths import ALWAYS_READ
from policy_extender.wire.structs import GO_KEYS, REQUIRED, expected, struct_for

from tests.support.bodies import sample

DECODERS = {
    "predicate": decode_predicate, "prioritize": decode_prioritize,
    "preemptable": decode_victims, "reclaimable": decode_victims,
    "jobEnqueueable": decode_job, "jobEnqueued": decode_job, "jobReady": decode_job,
    "queueOverused": decode_queue, "allocateFunc": decode_task_event,
    "deallocateFunc": decode_task_event,
}


@pytest.mark.parametrize("verb", DECODERS)
def test_every_sample_decodes_with_identity(verb, reads):
    request = DECODERS[verb](sample(verb), reads)
    roots = [getattr(request, f) for f in request.__dataclass_fields__ if f != "raw_evictees"]
    views = [v for r in roots for v in (r if isinstance(r, list) else [r])]
    assert views and all(v.name for v in views)


def test_session_close_accepts_any_object():
    assert decode_session_close(b"{}") is None
    assert decode_session_close(b'{"SomeFutureField": [1, {"a": null}]}') is None


@pytest.mark.parametrize("body,message", [
    (b"not even json", "$: malformed JSON"), (b"", "$: empty body: expected a JSON object"),
    (b"[]", "$: expected object, got array"), (b"7", "$: expected object, got integer"),
    (b"null", "$: expected object, got null"), (b'"{}"', "$: expected object, got string"),
    (b"{", "$: malformed JSON"),
])
def test_session_close_refuses_what_is_not_an_object(body, message):
    with pytest.raises(WireError) as error:
        decode_session_close(body)
    assert str(error.value).startswith(message)


def test_predicate_node_units_are_whole(full):
    node = decode_predicate(sample("predicate"), full).node
    assert node.idle.gpu == 7            # wire: 7000
    assert node.idle.pods == 107         # pods are plain on the wire
    assert node.allocatable.pods == 110
    assert node.idle.cpu == 60.55        # wire: 60550 millicores
    assert node.allocatable.memory == 547225399296
    assert node.idle["nvidia.com/gpu"] == 7
    assert node.idle["ephemeral-storage"] == node.idle.ephemeral_storage == 187136925387
    assert node.idle["nvidia.com/gpumem"] == 0
    assert node.releasing.cpu == 0 and node.releasing.gpu == 0   # ScalarResources: null


def test_predicate_node_fields(full):
    node = decode_predicate(sample("predicate"), full).node
    assert node.name == "node-0000"
    assert node.ready is True
    assert node.labels["topology.kubernetes.io/zone"] == "zone-c"
    assert node.conditions["Ready"] == "True" and node.conditions["MemoryPressure"] == "False"
    assert node.taints == [] and node.unschedulable is False
    assert sorted(t.name for t in node.tasks) == ["kube-proxy-22812", "node-exporter-a7005",
                                                  "run-0001-worker-0"]
    assert all(t.status == "Running" for t in node.tasks)


def test_predicate_task_fields(full):
    task = decode_predicate(sample("predicate"), full).task
    assert (task.name, task.namespace, task.role) == ("job-002-worker-0", "ml", "worker")
    assert task.status == "Pending" and task.priority == 10000
    assert task.requests.cpu == 2 and task.requests.gpu == 2 and task.requests.memory == 8 * 2**30
    assert task.priority_class == "batch-high"
    assert task.labels["volcano.sh/task-spec"] == "worker"
    assert task.annotations["scheduling.example.com/protected"] == "true"
    assert task.node_selector == {}
    assert [(t.key, t.operator, t.effect) for t in task.tolerations][-1] == ("nvidia.com/gpu", "Exists", "NoSchedule")
    assert task.job_id.startswith("ml/job-002-")
    assert task.job is None and task.queue is None      # no session


def test_minimal_read_set_gives_empty_values_not_errors():
    request = decode_predicate(sample("predicate"), {})
    assert request.task.uid == "e48b7984-17c8-4ce3-ac38-55abd10b7116"
    assert request.task.requests.gpu == 2                   # Resreq is always read
    assert request.task.labels == {} and request.node.labels == {}
    assert request.node.idle.gpu == 0 and request.node.tasks == []


def test_job_fields(full):
    job = decode_job(sample("jobReady"), full).job
    assert job.queue_name == "restricted" and job.min_available == 3
    assert job.min_resources.cpu == 4 and job.min_resources.memory == 12 * 2**30
    assert job.min_resources.gpu == 6
    assert job.allocated.gpu == 6 and job.allocated.pods == 2
    assert job.phase == "Inqueue"
    assert job.ready_tasks == 2 and job.pending_tasks == 0
    assert job.labels["volcano.sh/job-name"] == "job-002"


def test_queue_fields(full):
    queue = decode_queue(sample("queueOverused"), full).queue
    assert (queue.name, queue.uid, queue.weight, queue.state, queue.parent) == ("default", "default", 1, "Open", "root")
    assert queue.reclaimable is True
    assert queue.capability.cpu == 0 and queue.allocated.memory == 0
    assert queue.guarantee.cpu == 0


def test_victims_keep_exact_evictee_bytes(full):
    body = sample("preemptable")
    request = decode_victims(body, full)
    sent = json.loads(body)["evictees"]
    assert [json.loads(bytes(r)) for r in request.raw_evictees] == sent
    assert [e.uid for e in request.evictees] == [e["UID"] for e in sent]
    assert all(bytes(r) in body for r in request.raw_evictees)


def test_prioritize_nodes(full):
    request = decode_prioritize(sample("prioritize"), full)
    assert len(request.nodes) == len(json.loads(sample("prioritize"))["nodes"])
    assert all(n.allocatable.gpu >= 0 and n.name for n in request.nodes)


# ------------------------------------------------------------------ nulls and missing data

#: A task and a node as Go sends them at their emptiest: null wherever Go can send null (a nil
#: pointer, map or slice; anything inside a Kubernetes object), Go's zero values elsewhere.
NULL_TASK = {"UID": "t1", "Job": "", "Name": "", "Namespace": "", "NodeName": "", "TaskRole": "",
             "Resreq": None, "InitResreq": None, "Pod": None, "Status": 0, "Priority": 0,
             "Preemptable": False, "BestEffort": False}
NULL_NODE = {"Name": "n1", "Node": {"metadata": None, "spec": {"taints": None}, "status": None},
             "State": {"Phase": 0, "Reason": ""},
             "Idle": {"MilliCPU": 0, "Memory": 0, "ScalarResources": {"nvidia.com/gpu": None}},
             "Used": None, "Allocatable": None, "Capacity": None, "Releasing": None,
             "Pipelined": None, "Tasks": None}
#: the sample task, whole (every field a rule may read is there, as Volcano sends it)
TASK = json.loads(sample("predicate"))["task"]


def test_nulls_where_go_sends_null_read_as_empty(full):
    request = decode_predicate(json.dumps({"task": NULL_TASK, "node": NULL_NODE}).encode(), full)
    task, node = request.task, request.node
    assert task.labels == {} and task.tolerations == [] and task.requests.cpu == 0
    assert task.status is None and task.priority == 0 and task.preemptable is False
    assert node.taints == [] and node.conditions == {} and node.tasks == [] and node.ready is False
    assert node.idle.gpu == 0 and node.idle.cpu == 0 and node.used.memory == 0


def test_omitted_kubernetes_fields_read_as_empty(full):
    """Kubernetes leaves an empty map, list or string out of its objects (``omitempty``): a pod
    without annotations has no ``annotations`` key, or a null one. A rule reading them reads empty."""
    body = json.loads(sample("predicate"))
    del body["task"]["Pod"]["metadata"]["annotations"], body["task"]["Pod"]["spec"]["priorityClassName"]
    body["task"]["Pod"]["metadata"]["labels"] = None
    del body["node"]["Node"]["metadata"]["labels"], body["node"]["Node"]["status"]["conditions"]
    request = decode_predicate(json.dumps(body).encode(), full)
    assert request.task.annotations == {} and request.task.labels == {} and request.task.priority_class is None
    assert request.node.labels == {} and request.node.conditions == {}


def test_missing_unread_fields_read_as_empty():
    request = decode_predicate(b'{"task": {"UID": "t", "Job": "", "NodeName": ""}, '
                               b'"node": {"Name": "n", "NewField": [1]}}', {})
    assert request.task.requests.gpu == 0 and request.node.labels == {}
    assert request.node.allocatable.pods == 0 and request.node.name == "n"


def test_prioritize_null_nodes_is_no_nodes(full):
    assert decode_prioritize(json.dumps({"task": TASK, "nodes": None}).encode(), full).nodes == []


def test_victims_null_evictees_is_none(full):
    request = decode_victims(json.dumps({"evictor": TASK, "evictees": None}).encode(), full)
    assert request.evictees == [] and request.raw_evictees == []


def test_map_or_list_collections_both_decode():
    reads = {"job": frozenset({("Tasks", "*"), ("Tasks", "*", "Status")})}  # job.ready_tasks
    as_list = decode_job(b'{"job": {"UID": "j", "Queue": "q", "MinAvailable": 1, '
                         b'"Tasks": [{"UID": "a", "Status": 32}]}}', reads).job
    assert [t.status for t in as_list.tasks] == ["Running"] and as_list.ready_tasks == 1


# ------------------------------------------------------------------ errors with paths

T = b'"UID": "t", "Job": "", "NodeName": ""'  # a task's identity fields
N = b'"Name": "n"'                             # a node's


def _at(*path, value):
    """A change to a sample body: the value at ``path`` replaced (``...``: removed)."""
    def change(body):
        for key in path[:-1]:
            body = body[key]
        if value is ...:
            del body[path[-1]]
        else:
            body[path[-1]] = value
    return change


@pytest.mark.parametrize("change,message", [
    (_at("task", "Resreq", "MilliCPU", value="2"), "$.task.Resreq.MilliCPU: expected number, got string"),
    (_at("task", "Status", value="Running"), "$.task.Status: expected integer, got string"),
    (_at("node", "Node", "metadata", "labels", "a", value=1), "$.node.Node.metadata.labels[...]: expected string, got integer"),
    (_at("node", "State", "Phase", value=True), "$.node.State.Phase: expected integer, got bool"),
    (_at("node", value=[]), "$.node: expected object, got array"),
    (_at("node", value=...), "$.node: missing"),
])
def test_wrong_types_raise_wire_error_with_path(change, message, full):
    with pytest.raises(WireError) as error:
        decode_predicate(_with("predicate", change), full)
    assert str(error.value).startswith(message)


@pytest.mark.parametrize("body,message", [
    (b'[]', "$: expected object, got array"),
    (sample("predicate")[:-1], "$: malformed JSON"),
    (b'', "$: empty body: expected a JSON object"),
])
def test_a_body_that_is_no_json_object_is_a_wire_error(body, message, full):
    with pytest.raises(WireError) as error:
        decode_predicate(body, full)
    assert str(error.value).startswith(message)


def test_evictee_error_path_names_the_evictee(full):
    body = json.loads(sample("preemptable"))
    body["evictees"].append({**body["evictees"][0], "Priority": "high"})
    with pytest.raises(WireError, match=r"^\$\.evictees\[1\]\.Priority: expected integer, got string"):
        decode_victims(json.dumps(body).encode(), full)


def test_bad_quantity_string_is_a_wire_error(full):
    body = b'{"queue": {"Queue": {"spec": {"capability": {"cpu": "lots"}}}}}'
    with pytest.raises(WireError, match=r"capability.*Kubernetes quantity"):
        decode_queue(body, full)


def _with(verb: str, change) -> bytes:
    body = json.loads(sample(verb))
    change(body)
    return json.dumps(body).encode()


def _first(mapping: dict) -> dict:
    return next(iter(mapping.values()))


#: (verb, where, Go type's bound): integers past what Volcano's Go field holds
GO_INTEGERS = [
    ("predicate", lambda b, v: b["task"].__setitem__("Priority", v), "$.task.Priority", 31),
    ("predicate", lambda b, v: b["task"].__setitem__("Status", v), "$.task.Status", 63),
    ("predicate", lambda b, v: b["node"]["Idle"].__setitem__("MaxTaskNum", v), "$.node.Idle.MaxTaskNum", 63),
    ("jobEnqueueable", lambda b, v: b["job"].__setitem__("MinAvailable", v), "$.job.MinAvailable", 31),
    ("queueOverused", lambda b, v: b["queue"].__setitem__("Weight", v), "$.queue.Weight", 31),
    ("onSessionOpen", lambda b, v: _first(b["Jobs"]).__setitem__("Priority", v), "$.Jobs[...].Priority", 31),
    ("onSessionOpen", lambda b, v: _first(_first(b["Jobs"])["Tasks"])["Resreq"].__setitem__("MaxTaskNum", v),
     "$.Jobs[...].Tasks[...].Resreq.MaxTaskNum", 63),
]


@pytest.mark.parametrize("verb,change,where,bits", GO_INTEGERS)
def test_an_integer_past_its_go_type_is_a_wire_error_and_its_bounds_decode(verb, change, where, bits, full):
    """msgspec's ``int`` takes any size; Volcano's Go fields hold int32 or int64. Past that, a 400
    naming the field and the bound (an int past 64 bits once reached the session store's msgpack
    encoder: a 500); the bounds themselves decode."""
    decoder = decode_session_open if verb == "onSessionOpen" else DECODERS[verb]
    for value, bound, sign in ((2**bits, 2**bits - 1, "<="), (-2**bits - 1, -2**bits, ">=")):
        with pytest.raises(WireError) as raised:
            decoder(_with(verb, lambda b: change(b, value)), full)
        assert str(raised.value) == (f"{where}: expected an integer {sign} {bound} (a Go int{bits + 1}: "
                                     "Volcano never sends one out of its range)")
        decoder(_with(verb, lambda b: change(b, bound)), full)


def test_wrong_type_in_an_unread_field_is_ignored():
    body = b'{"task": {"Priority": "high", ' + T + b'}, "node": {"Idle": "x", ' + N + b'}}'
    assert decode_predicate(body, {}).node.name == "n"


# ------------------------------------------------------------------ pruning

def test_read_set_without_node_tasks_has_no_tasks_attribute():
    node_type = struct_for("node", frozenset({("Idle",)}))
    assert "Tasks" not in node_type.__struct_fields__ and "Node" not in node_type.__struct_fields__
    raw = decode_predicate(sample("predicate"), {"node": frozenset({("Idle",)})}).node.raw
    assert not hasattr(raw, "Tasks")


def test_node_tasks_keep_only_read_task_fields():
    reads = {"node": frozenset({("Tasks", "*"), ("Tasks", "*", "Pod", "metadata", "labels")})}
    node = decode_predicate(sample("predicate"), reads).node
    first = node.tasks[0].raw
    assert set(type(first).__struct_fields__) == {"UID", "Job", "Name", "Namespace", "NodeName", "Resreq", "Pod"}
    assert set(type(first.Pod).__struct_fields__) == {"metadata"}
    assert set(type(first.Pod.metadata).__struct_fields__) == {"labels"}


def test_decoded_struct_holds_no_pod_spec():
    raw = decode_predicate(sample("predicate"), {"task": frozenset({("Pod", "metadata", "labels")})}).task.raw
    assert msgspec.structs.asdict(raw.Pod).keys() == {"metadata"}


def test_benchmark_body_has_twenty_pods_and_decodes(full):
    from bench.cpu.decode import synthetic_body
    body = synthetic_body(json.loads(sample("predicate")), 20)
    node = decode_predicate(body, full).node
    assert len(node.tasks) == 20 and len({t.uid for t in node.tasks}) == 20


# ------------------------------------------------------------------ required fields (structs.REQUIRED)

#: verb -> (where its top-level objects are in the body, as (key, index or None), object type)
OBJECTS = {
    "predicate": [("task", None, "task"), ("node", None, "node")],
    "prioritize": [("task", None, "task"), ("nodes", 0, "node")],
    "preemptable": [("evictor", None, "task"), ("evictees", 0, "task")],
    "reclaimable": [("evictor", None, "task"), ("evictees", 0, "task")],
    "jobEnqueueable": [("job", None, "job")], "jobEnqueued": [("job", None, "job")],
    "jobReady": [("job", None, "job")], "queueOverused": [("queue", None, "queue")],
    "allocateFunc": [("task", None, "task")], "deallocateFunc": [("task", None, "task")],
}


def _required_cases():
    from policy_extender.wire.structs import REQUIRED, NonEmpty
    for verb, objects in OBJECTS.items():
        for key, index, root in objects:
            for field, kind in REQUIRED[root].items():
                where = f"$.{key}" + (f"[{index}]" if index is not None else "") + f".{field}"
                yield verb, key, index, field, "missing", where + ": missing: expected"
                yield verb, key, index, field, None, where + ": expected"
                yield verb, key, index, field, [], where + ": expected"
                if kind is NonEmpty:
                    yield verb, key, index, field, "", where + ": expected a non-empty string"


REQUIRED_CASES = list(_required_cases())


@pytest.mark.parametrize("verb,key,index,field,value,message", REQUIRED_CASES,
                         ids=[f"{c[0]}-{c[1]}-{c[3]}-{c[4]!r}" for c in REQUIRED_CASES])
def test_a_required_field_missing_null_or_mistyped_is_a_wire_error(verb, key, index, field, value, message, reads):
    """Whatever the policies read (even nothing: ``reads`` is minimal or full), the fields the
    service keys on must be there."""
    body = json.loads(sample(verb))
    target = body[key] if index is None else body[key][index]
    if value == "missing":
        del target[field]
    else:
        target[field] = value
    with pytest.raises(WireError) as error:
        DECODERS[verb](json.dumps(body).encode(), reads)
    assert str(error.value).startswith(message), str(error.value)


def test_every_required_field_is_in_every_sample():
    """The samples are Volcano's bodies: each carries each required field, non-null (so the list
    asks only for what Volcano always sends)."""
    from policy_extender.wire.structs import REQUIRED
    assert len(REQUIRED_CASES) > 60
    for verb, objects in OBJECTS.items():
        body = json.loads(sample(verb))
        for key, index, root in objects:
            target = body[key] if index is None else body[key][index]
            assert all(target.get(field) is not None for field in REQUIRED[root]), (verb, key)
    opened = json.loads(sample("onSessionOpen"))
    for job in opened["Jobs"].values():
        assert all(job.get(field) is not None for field in REQUIRED["job"])
    for queue in opened["Queues"].values():
        assert all(queue.get(field) is not None for field in REQUIRED["queue"])


def test_required_fields_are_decoded_even_when_no_policy_reads_them():
    job = decode_job(sample("jobEnqueueable"), {}).job
    assert job.min_available == json.loads(sample("jobEnqueueable"))["job"]["MinAvailable"]
    assert decode_task_event(sample("allocateFunc"), {}).task.uid


def test_tasks_inside_a_node_or_a_job_are_not_held_to_the_identity_fields():
    """The identity fields are required of the top-level objects only: the pods on a node, the
    tasks of a job are held to what the rules read of them, no more."""
    reads = {"node": frozenset({("Tasks", "*"), ("Tasks", "*", "Resreq")}),   # node.tasks, t.requests
             "job": frozenset({("Tasks", "*"), ("Tasks", "*", "Status")})}   # job.ready_tasks
    body = json.loads(sample("predicate"))
    for task in body["node"]["Tasks"].values():
        del task["UID"], task["Job"]
        task["NodeName"] = None
    assert len(decode_predicate(json.dumps(body).encode(), reads).node.tasks) == len(body["node"]["Tasks"])
    job = json.loads(sample("jobReady"))
    for task in job["job"]["Tasks"].values():
        del task["UID"]
    assert decode_job(json.dumps(job).encode(), reads).job.tasks


def _go_names(obj: dict) -> dict:
    """A v1.14 PodGroup or Queue as Volcano <= v1.13 marshals its internal type: ObjectMeta
    inline, Spec and Status and most of their fields under their Go names (guarantee, deserved and
    parent were tagged). Read from volcano.sh/apis v1.10.0 and v1.13.0, pkg/apis/scheduling."""
    tagged = {"guarantee", "deserved", "parent"}
    legacy = dict(obj.get("metadata") or {})
    for part in ("spec", "status"):
        legacy[part.capitalize()] = {k if k in tagged else k[0].upper() + k[1:]: v
                                     for k, v in (obj.get(part) or {}).items()}
    return legacy


def test_podgroup_and_queue_of_volcano_up_to_v1_13_decode_as_of_v1_14(full):
    """e2e/volcano/cases, enqueue on Volcano v1.10.0 found queue.state null: the
    Queue of a QueueInfo (and the PodGroup of a JobInfo) arrived under Go field names."""
    body = json.loads(sample("jobReady"))
    body["job"]["PodGroup"] = _go_names(body["job"]["PodGroup"])
    assert "Spec" in body["job"]["PodGroup"] and "labels" in body["job"]["PodGroup"]
    old, new = decode_job(json.dumps(body).encode(), full).job, decode_job(sample("jobReady"), full).job
    for field in ("min_resources", "phase", "labels", "annotations"):
        assert getattr(old, field) == getattr(new, field), field
    assert old.phase == "Inqueue" and old.min_resources.gpu == 6

    body = json.loads(sample("queueOverused"))
    body["queue"]["Queue"] = _go_names(body["queue"]["Queue"])
    old, new = decode_queue(json.dumps(body).encode(), full).queue, decode_queue(sample("queueOverused"), full).queue
    for field in ("capability", "deserved", "guarantee", "allocated", "reclaimable", "state", "parent",
                  "labels", "annotations"):
        assert getattr(old, field) == getattr(new, field), field
    assert old.state == "Open" and old.parent == "root"


# ------------------------------------------------------------------ fields the rules read (structs.GO_KEYS)

#: (object type, verb whose body carries one, where it is): the top-level objects of the samples
TOP_LEVEL = {"task": ("predicate", ("task",)), "node": ("predicate", ("node",)),
             "job": ("jobEnqueueable", ("job",)), "queue": ("queueOverused", ("queue",))}
GO_CASES = [(root, key, nullable) for root in TOP_LEVEL for key, (_, nullable) in GO_KEYS[root].items()]


def _decode(verb: str, body: bytes, reads):
    return (decode_session_open if verb == "onSessionOpen" else DECODERS[verb])(body, reads)


@pytest.mark.parametrize("root,key,nullable", GO_CASES, ids=[f"{r}.{k}" for r, k, _ in GO_CASES])
def test_a_field_a_rule_reads_is_required_as_go_sends_it(root, key, nullable, full):
    """Every key of Volcano's structs that a rule reads: missing, a 400 naming it and what Go sends
    there; null, a 400 unless Go sends null there (a nil pointer, map or slice); another JSON type,
    a 400. With no rule reading it (the minimal read set), all three are accepted, as before."""
    verb, path = TOP_LEVEL[root]
    where = "$." + ".".join(path) + "." + key
    missing = _with(verb, _at(*path, key, value=...))
    with pytest.raises(WireError) as error:
        _decode(verb, missing, full)
    assert str(error.value).startswith(f"{where}: missing: expected {expected(root, key)}; Volcano always sends"), \
        str(error.value)
    nulled = _with(verb, _at(*path, key, value=None))
    if nullable:
        _decode(verb, nulled, full)
    else:
        with pytest.raises(WireError, match=rf"^{re.escape(where)}: expected .*, got null"):
            _decode(verb, nulled, full)
    odd = [] if GO_KEYS[root][key][0] != "object" else "x"
    with pytest.raises(WireError, match=rf"^{re.escape(where)}: expected "):
        _decode(verb, _with(verb, _at(*path, key, value=odd)), full)
    if key not in REQUIRED.get(root, {}):
        decoded_anyway = (key,) in ALWAYS_READ.get(root, ())  # its type is checked: the service reads it
        for body in (missing, nulled) + (() if decoded_anyway else (_with(verb, _at(*path, key, value=odd)),)):
            _decode(verb, body, {})


def test_only_what_a_rule_reads_is_required():
    """``task.priority`` read: Priority required, Preemptable not; ``node.idle.gpu`` read: Idle
    and its ScalarResources required, not its MilliCPU, nor Used; ``node.used.cpu``: MilliCPU."""
    reads = compile_sources({"p.policy": "filter f: task.priority > 0 and node.idle.gpu >= 0 and node.used.cpu >= 0\n"}).reads
    body = json.loads(sample("predicate"))
    del body["task"]["Preemptable"], body["node"]["Idle"]["MilliCPU"], body["node"]["Used"]["ScalarResources"]
    body["node"]["Idle"]["Memory"] = None
    request = decode_predicate(json.dumps(body).encode(), reads)
    assert request.task.priority == 10000 and request.node.idle.gpu == 7
    for change, where in ((_at("task", "Priority", value=...), "$.task.Priority"),
                          (_at("node", "Idle", value=...), "$.node.Idle"),
                          (_at("node", "Idle", "ScalarResources", value=...), "$.node.Idle.ScalarResources"),
                          (_at("node", "Used", "MilliCPU", value=None), "$.node.Used.MilliCPU")):
        with pytest.raises(WireError, match=rf"^{re.escape(where)}: "):
            decode_predicate(_with("predicate", change), reads)
    decode_predicate(_with("predicate", _at("node", "Idle", value=None)), reads)  # a nil *Resource


def test_a_value_read_whole_requires_each_of_its_keys():
    """``node.idle`` by a computed name may read any amount: the Resource's three keys required."""
    reads = compile_sources({"p.policy": 'filter f: node.idle[task.name] >= 0\n'}).reads
    for key in ("MilliCPU", "Memory", "ScalarResources"):
        with pytest.raises(WireError, match=rf"^\$\.node\.Idle\.{key}: missing"):
            decode_predicate(_with("predicate", _at("node", "Idle", key, value=...)), reads)
    decode_predicate(_with("predicate", _at("node", "Idle", "MaxTaskNum", value=...)), reads)


def test_what_a_rule_reads_of_nested_tasks_is_required_of_each():
    reads = {"job": frozenset({("Tasks", "*"), ("Tasks", "*", "Status")})}  # job.ready_tasks
    body = json.loads(sample("jobReady"))
    del next(iter(body["job"]["Tasks"].values()))["Status"]
    with pytest.raises(WireError, match=r"^\$\.job\.Tasks\[\.\.\.\]\.Status: missing: expected an integer"):
        decode_job(json.dumps(body).encode(), reads)


def test_every_go_key_is_in_every_sample():
    """The samples are Volcano's bodies: each object carries every key of GO_KEYS, non-null where
    Go cannot send null (so the list asks only for what Volcano always sends)."""
    bodies = {verb: json.loads(sample(verb)) for verb in OBJECTS}
    opened = json.loads(sample("onSessionOpen"))
    objects = [(root, body[key] if index is None else body[key][index])
               for verb, body in bodies.items() for key, index, root in OBJECTS[verb]]
    objects += [("job", job) for job in opened["Jobs"].values()] + [("queue", q) for q in opened["Queues"].values()]
    objects += [("task", t) for job in opened["Jobs"].values() for t in job["Tasks"].values()]
    objects += [("task", t) for t in bodies["predicate"]["node"]["Tasks"].values()]
    for root, value in objects:
        for key, (_, nullable) in GO_KEYS[root].items():
            assert key in value and (nullable or value[key] is not None), (root, key)
    resources = [value[key] for root, value in objects for key in GO_KEYS[root]
                 if root in ("task", "node", "job") and isinstance(value.get(key), dict)
                 and "MilliCPU" in value[key]]
    assert len(resources) > 20
    for resource in resources:
        assert all(key in resource and (nullable or resource[key] is not None)
                   for key, (_, nullable) in GO_KEYS["Resource"].items()), resource
