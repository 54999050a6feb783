"""Every view of the cluster is net of the cycle: one row per root and field that a cycle's
allocateFunc / deallocateFunc events move (and per field they must not move), each a real
onSessionOpen, the events as Volcano's Statement sends them, then a predicate through the
service's own handlers whose filter rule says the field's value in its reason.

The events carry the statuses Volcano's ``pkg/scheduler/framework/statement.go`` gives the task
before it calls the extender: ``Allocate`` Allocated, ``Pipeline`` Pipelined, ``Evict``
Releasing, their undos (``unallocate``, ``unpipeline``) Pending and ``unevict`` Running.
"""

from __future__ import annotations

import orjson
import pytest

from policy_extender.fixture_runner.exchange import Exchanger
from policy_extender.policyset.compile import compile_sources
from policy_extender.wire import compact

PENDING, ALLOCATED, PIPELINED, RUNNING, RELEASING = 1, 2, 4, 32, 64

INF = {"name": "inf-a-0", "namespace": "ml", "job": "ml/inf-a", "role": "serve", "priority": 7,
       "labels": {"app": "inference"}, "annotations": {"team": "a"}, "requests": {"gpu": 1}}
TRAIN_0 = {"name": "train-0", "namespace": "ml", "job": "ml/train", "node": "s1",
           "labels": {"app": "train"}, "requests": {"gpu": 2}}
TRAIN_1 = {"name": "train-1", "namespace": "ml", "job": "ml/train", "labels": {"app": "train"},
           "requests": {"gpu": 1}}
SESSION: dict[str, list[dict]] = {
    "jobs": [{"uid": "ml/inf-a", "namespace": "ml", "queue": "default", "tasks": [INF]},
             {"uid": "ml/train", "namespace": "ml", "queue": "default", "tasks": [TRAIN_0, TRAIN_1]}],
    "queues": [{"name": "default"}],
    # s1 runs train-0 (2 of its 8 GPUs); s2 is empty
    "nodes": [{"name": "s1", "labels": {"rack": "r1"}, "allocatable": {"gpu": 8},
               "tasks": [{k: v for k, v in TRAIN_0.items() if k != "node"}]},
              {"name": "s2", "labels": {"rack": "r2"}, "allocatable": {"gpu": 8}}],
}
TASKS = {spec["name"]: spec for spec in (INF, TRAIN_0, TRAIN_1)}
INF_UID = compact.task(INF, "task")["UID"]

#: the events of each row, by name: (verb, task, status, node)
EVENTS: dict[str, list[tuple[str, str, int, str]]] = {
    "none": [],
    "allocate inf": [("allocateFunc", "inf-a-0", ALLOCATED, "s2")],
    "pipeline inf": [("allocateFunc", "inf-a-0", PIPELINED, "s2")],
    "allocate inf, undone": [("allocateFunc", "inf-a-0", ALLOCATED, "s2"),
                             ("deallocateFunc", "inf-a-0", PENDING, "s2")],
    "allocate train-1": [("allocateFunc", "train-1", ALLOCATED, "s1")],
    "evict train-0": [("deallocateFunc", "train-0", RELEASING, "s1")],
    "evict train-0, unevicted": [("deallocateFunc", "train-0", RELEASING, "s1"),
                                 ("allocateFunc", "train-0", RUNNING, "s1")],
    "preempt: evict train-0, pipeline inf": [("deallocateFunc", "train-0", RELEASING, "s1"),
                                             ("allocateFunc", "inf-a-0", PIPELINED, "s1")],
}

#: (expression, events, the value the reason shows); the predicate's task is train-1, its node s1
ROWS = [
    # session.allocations: each field of an allocation, from its event's task
    ("session.allocations[0].task", "allocate inf", INF_UID),
    ("session.allocations[0].job", "allocate inf", "ml/inf-a"),
    ("session.allocations[0].queue", "allocate inf", "default"),
    ("session.allocations[0].node", "allocate inf", "s2"),
    ("session.allocations[0].requests.gpu", "allocate inf", "1"),
    ("session.allocations[0].name", "allocate inf", "inf-a-0"),
    ("session.allocations[0].namespace", "allocate inf", "ml"),
    ("session.allocations[0].role", "allocate inf", "serve"),
    ("session.allocations[0].labels['app']", "allocate inf", "inference"),
    ("session.allocations[0].annotations['team']", "allocate inf", "a"),
    ("session.allocations[0].priority", "allocate inf", "7"),
    ("session.allocations[0].status", "allocate inf", "Allocated"),
    ("session.allocations[0].status", "pipeline inf", "Pipelined"),
    ("len(session.allocations)", "allocate inf, undone", "0"),
    ("count(a for a in session.allocations if a.labels['app'] == 'inference')", "preempt: evict train-0, pipeline inf", "1"),
    # session.evictions: the same fields, from the eviction's event
    ("session.evictions[0].name", "evict train-0", "train-0"),
    ("session.evictions[0].labels['app']", "evict train-0", "train"),
    ("session.evictions[0].status", "evict train-0", "Releasing"),
    ("session.evictions[0].node", "evict train-0", "s1"),
    ("len(session.evictions)", "evict train-0, unevicted", "0"),
    # session counts
    ("session.allocated.tasks", "allocate inf", "1"),
    ("session.node.gpu", "evict train-0", "-2"),
    ("session.nodes['s1'].tasks", "preempt: evict train-0, pipeline inf", "0"),
    ("session.job.tasks", "allocate train-1", "1"),
    ("session.queues['default'].gpu", "allocate inf", "1"),
    # cluster.nodes: idle, used and tasks of each node
    ("cluster.nodes[1].idle.gpu", "none", "8"),
    ("cluster.nodes[1].idle.gpu", "allocate inf", "7"),
    ("cluster.nodes[1].used.gpu", "allocate inf", "1"),
    ("cluster.nodes[1].idle.gpu", "allocate inf, undone", "8"),
    ("cluster.nodes[0].idle.gpu", "evict train-0", "8"),
    ("cluster.nodes[0].used.gpu", "evict train-0", "0"),
    ("len(cluster.nodes[1].tasks)", "none", "0"),
    ("len(cluster.nodes[1].tasks)", "allocate inf", "1"),
    ("len(cluster.nodes[1].tasks)", "allocate inf, undone", "0"),
    ("cluster.nodes[1].tasks[0].name", "allocate inf", "inf-a-0"),
    ("cluster.nodes[1].tasks[0].labels['app']", "allocate inf", "inference"),
    ("cluster.nodes[1].tasks[0].status", "allocate inf", "Allocated"),
    ("cluster.nodes[1].tasks[0].status", "pipeline inf", "Pipelined"),
    ("cluster.nodes[1].tasks[0].node_name", "allocate inf", "s2"),
    ("cluster.nodes[1].tasks[0].requests.gpu", "allocate inf", "1"),
    ("cluster.nodes[1].tasks[0].job.name", "allocate inf", "inf-a"),
    ("len(cluster.nodes[0].tasks)", "none", "1"),
    ("len(cluster.nodes[0].tasks)", "evict train-0", "0"),
    ("len(cluster.nodes[0].tasks)", "evict train-0, unevicted", "1"),
    ("cluster.nodes[0].tasks[0].name", "preempt: evict train-0, pipeline inf", "inf-a-0"),
    ("sum(count(t for t in n.tasks if t.labels['app'] == 'inference') for n in cluster.nodes if n.labels['rack'] == 'r2')", "allocate inf", "1"),
    # cluster sums
    ("cluster.idle.gpu", "none", "14"),
    ("cluster.idle.gpu", "allocate inf", "13"),
    ("cluster.used.gpu", "allocate inf", "3"),
    ("cluster.idle.gpu", "evict train-0", "16"),
    # the task's job (from the snapshot): its tasks' statuses, ready and pending, allocated
    ("job.ready_tasks", "none", "1"),
    ("job.ready_tasks", "allocate train-1", "2"),
    ("job.pending_tasks", "allocate train-1", "0"),
    ("job.ready_tasks", "evict train-0", "0"),
    ("job.allocated.gpu", "none", "2"),
    ("job.allocated.gpu", "allocate train-1", "3"),
    ("job.allocated.gpu", "evict train-0", "0"),
    ("job.allocated.gpu", "evict train-0, unevicted", "2"),
    ("count(t for t in job.tasks if t.status == 'Releasing')", "evict train-0", "1"),
    ("count(t for t in job.tasks if t.status == 'Allocated' and t.node_name == 's1')", "allocate train-1", "1"),
    ("task.job.ready_tasks", "allocate train-1", "2"),
    ("cluster.nodes[1].tasks[0].job.ready_tasks", "allocate inf", "1"),
    ("cluster.nodes[1].tasks[0].job.pending_tasks", "pipeline inf", "0"),
    ("cluster.nodes[1].tasks[0].job.allocated.gpu", "pipeline inf", "0"),
    # what the events do not move: the Queue's and the PodGroups' status as of the open
    ("cluster.queues['default'].allocated.gpu ?? 0", "allocate inf", "0"),
    ("cluster.jobs['default'].running", "allocate inf", "0"),
    ("job.phase", "allocate train-1", "Inqueue"),
]


def _task_body(name: str, status: int, node: str) -> bytes:
    spec = {k: v for k, v in TASKS[name].items() if k != "node"}
    info = compact.task(spec, "task")
    return orjson.dumps({"task": {**info, "Status": status, "NodeName": node}})


def _reason(expression: str, events: str) -> str:
    policy = compile_sources({"probe.policy": f'filter probe: false\n    reason "{{{expression}}}"\n'})
    exchanger = Exchanger(policy)
    exchanger.open_session(orjson.dumps(compact.session_body(SESSION["jobs"], SESSION["queues"], SESSION["nodes"])))
    for verb, name, status, node in EVENTS[events]:
        exchanger.call(verb, _task_body(name, status, node))
    train_1 = compact.task(TRAIN_1, "task")
    s1 = compact.node(SESSION["nodes"][0], "node")
    answer = exchanger.call("predicate", orjson.dumps({"task": train_1, "node": s1}))
    exchanger.close_session()
    return answer["status"].split(": ", 1)[1]


@pytest.mark.parametrize("expression,events,value", ROWS, ids=[f"{e} after {v}" for e, v, _ in ROWS])
def test_each_field_follows_the_cycles_events(expression, events, value):
    assert _reason(expression, events) == value


def test_a_record_keeps_only_what_the_rules_read_of_a_placed_task():
    """The allocate event's record keeps its identity, requests and status as before, and of its
    task only the fields a rule reads of an allocation or of a node's tasks: not the pod."""
    from policy_extender.session.allocation import decode_allocation

    def kept(text: str):
        exchanger = Exchanger(compile_sources({"p.policy": text}))
        exchanger.open_session(orjson.dumps(compact.session_body(SESSION["jobs"], SESSION["queues"], SESSION["nodes"])))
        exchanger.call("allocateFunc", _task_body("inf-a-0", ALLOCATED, "s2"))
        store = exchanger.service.sessions
        head = store.head()
        assert head is not None
        [change] = store.changes(head.session_id, 0)
        return decode_allocation(change.record)

    plain = kept("filter f: session.allocated.tasks < 3\n")
    assert (plain.task_uid, plain.job_uid, plain.node_name, plain.status, plain.task) == (INF_UID, "ml/inf-a", "s2", ALLOCATED, None)
    assert plain.resources == {"nvidia.com/gpu": 1.0, "pods": 1.0}
    labels = kept("filter f: count(a for a in session.allocations if a.labels['app'] == 'x') < 3\n")
    assert labels.task == {"Pod": {"metadata": {"labels": {"app": "inference"}}}}
    node_tasks = kept("filter f: sum(len(n.tasks) for n in cluster.nodes if any(t.annotations['team'] == 'a' and t.name != 'x' for t in n.tasks)) < 3\n")
    assert node_tasks.task == {"Name": "inf-a-0", "Pod": {"metadata": {"annotations": {"team": "a"}}}}


def test_a_record_written_before_records_kept_the_task_still_decodes():
    """A rolling upgrade: a record of the old shape (four fields) in the store decodes with no
    status and no task, and its allocation reads its identity, null task fields."""
    import msgspec

    from policy_extender.session.allocation import decode_allocation
    from policy_extender.wire.session_views import PlacedTask, allocation_view

    record = decode_allocation(msgspec.msgpack.encode(["uid-1", "ml/inf-a", "s2", {"nvidia.com/gpu": 1.0}]))
    assert (record.status, record.task) == (0, None)
    view = allocation_view(PlacedTask(record.task_uid, record.job_uid, "default", record.node_name,
                                      record.resources, record.status, record.task))
    assert (view.task, view.node, view.name, view.labels, view.status) == ("uid-1", "s2", None, {}, None)
    assert view.task_raw() == {"UID": "uid-1", "Job": "ml/inf-a", "NodeName": "s2"}


def test_a_picture_replaced_by_the_next_is_freed_without_a_collection():
    """A picture with events (its jobs net, its cluster nodes seen through them) holds no
    reference cycle: once the cache moves on, its reference count frees it, no collection waits."""
    import gc
    import weakref

    policy = compile_sources({"p.policy": "filter f: job.ready_tasks + len(cluster.nodes[1].tasks) >= 0\n"})
    exchanger = Exchanger(policy)
    exchanger.open_session(orjson.dumps(compact.session_body(SESSION["jobs"], SESSION["queues"], SESSION["nodes"])))
    exchanger.call("allocateFunc", _task_body("inf-a-0", ALLOCATED, "s2"))
    cache = exchanger.service.session_cache
    gc.disable()
    try:
        env = cache.env()
        assert env.job("ml/inf-a").ready_tasks == 1 and len(env.cluster_view().nodes[1].tasks) == 1
        assert env.cluster_view().nodes[1].tasks[0].job.ready_tasks == 1
        picture = weakref.ref(env)
        del env
        exchanger.call("allocateFunc", _task_body("train-1", ALLOCATED, "s1"))
        assert cache.env().job("ml/train").ready_tasks == 2  # the cache moved on to the next picture
        assert picture() is None, gc.get_referrers(picture())
    finally:
        gc.enable()
        exchanger.close_session()
