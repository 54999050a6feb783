"""The context schema is internally consistent: every type a field names exists."""

import re

import pytest

from policy_extender import schema

SCALARS = {"number", "string", "bool", "any"}


def _named_types(type_expr):
    inner = re.fullmatch(r"(?:list|map)\[(.+)\]", type_expr)
    return _named_types(inner.group(1)) if inner else [type_expr]


@pytest.mark.parametrize("owner,field", [(t, f) for t, fs in schema.TYPES.items() for f in fs.values()],
                         ids=lambda v: getattr(v, "name", v))
def test_field_types_exist(owner, field):
    for name in _named_types(field.type):
        assert name in SCALARS or name in schema.TYPES, f"{owner}.{field.name}: unknown type {name}"


@pytest.mark.parametrize("kind,roots", schema.DECISION_ROOTS.items())
def test_decision_roots_name_object_types(kind, roots):
    assert all(t in schema.TYPES for t in roots.values())


def test_resource_shorthands_are_fields_of_resources_and_counts():
    for name in schema.RESOURCE_SHORTHANDS:
        assert schema.field("resources", name) is not None
        assert schema.field("counts", name) is not None


#: object types Volcano's bodies carry (``cluster``: onSessionOpen's, the snapshot; the rest,
#: counts/session/allocation/jobcounts, the service computes from the session)
BODY_TYPES = ("resources", "taint", "toleration", "task", "node", "job", "queue", "cluster")


def test_every_field_a_body_carries_has_its_go_keys_in_the_wire_layer_and_only_there():
    from policy_extender.wire.paths import WIRE
    carried = {(t, f.name) for t in BODY_TYPES for f in schema.TYPES[t].values() if not f.session}
    assert carried <= set(WIRE), carried - set(WIRE)
    fields = {(t, f.name) for t in BODY_TYPES for f in schema.TYPES[t].values()}
    # an allocation's own fields are read off its event's task: their paths are a task field's
    placed = {step for step in WIRE if step[0] == "allocation"}
    assert set(WIRE) - placed <= fields, set(WIRE) - placed - fields  # (task.job, task.queue, job.queue: keys to look up)
    task_paths = {path for (t, _), paths in WIRE.items() if t == "task" for path in paths}
    assert placed and all(set(WIRE[step]) <= task_paths for step in placed)
    assert not any(hasattr(f, "wire") for fs in schema.TYPES.values() for f in fs.values())


def test_reads_become_the_go_paths_of_each_step():
    from policy_extender.wire.paths import go_reads
    node_task_gpu = ((("node", "tasks"), ("task", "requests"), ("resources", "gpu")), False)
    whole_idle = ((("node", "idle"),), True)
    counts = ((("node", "tasks"), ("counts", "gpu")), False)  # a step no body carries: nothing to decode
    reads = go_reads({"node": [node_task_gpu, whole_idle, counts], "task": []})
    # what the rules read, each step (the decoders add wire.paths.ALWAYS_READ themselves)
    assert reads["node"] == {("Tasks", "*", "Resreq", "ScalarResources"), ("Idle",)}
    assert reads["task"] == frozenset()


def test_a_policy_reading_through_the_session_decodes_the_job_not_the_task():
    from policy_extender.policyset import compile_sources
    reads = compile_sources({"a.policy": 'filter f: task.job.name == "x" and node.idle.gpu > 0\n'}).reads
    assert reads["task"] == {("Job",)}  # the task's Job finds its job; the decoders add wire.paths.ALWAYS_READ
    assert ("Name",) in reads["job"]
    assert ("Idle", "ScalarResources") in reads["node"]
