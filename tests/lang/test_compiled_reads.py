"""The compiler's short paths for the reads most rules make: a map field with a literal key
(``task.annotations["x"]``) and one resource amount (``node.idle.gpu``) read off a wire view's
raw object, and a ``when`` guard that answers True or False used as it is. Each must read what
the view's own field reads, for every shape of raw object and for roots that are not wire views,
also when one compiled rule sees roots of several classes in turn (it remembers the last class)."""

import copy
import json

import pytest

from policy_extender.lang.runtime import Context
from policy_extender.policyset import compile_sources
from policy_extender.wire import decode
from policy_extender.wire.views import NodeView, TaskView
from tests.lang.harness import NODE, TASK, merged

MAP_READS = {"ann": 'task.annotations["zone"]', "lab": 'task.labels["app"]', "sel": 'task.node_selector["disk"]',
             "node_lab": 'node.labels["zone"]'}
AMOUNT_READS = {"gpu": "node.idle.gpu", "free": "free_gpu", "cpu": "task.requests.cpu", "mem": "node.idle.memory",
                "pods": "node.allocatable.pods"}


def _policy(reads: dict[str, str]):
    """One filter per read: ``<read> == <read>`` so the test closure's left side is the read."""
    return compile_sources({"r.policy": "".join(f"filter {n}: {e} == {e}\n" for n, e in reads.items())})


def _left(rule, task, node):
    """The compiled read itself: the left operand of the rule's ``==`` closure."""
    cells = dict(zip(rule.test.__code__.co_freevars, (c.cell_contents for c in rule.test.__closure__)))
    return cells["fl"](Context(None, [None] * 8, task=task, node=node))


TASK_FULL = merged(TASK, {"Pod": {"metadata": {"labels": {"app": "web"}, "annotations": {"zone": "a"}},
                                  "spec": {"nodeSelector": {"disk": "ssd"}}},
                          "Resreq": {"MilliCPU": 2500, "Memory": 10, "ScalarResources": {"nvidia.com/gpu": 1000}}})
NODE_FULL = merged(NODE, {"Node": {"metadata": {"labels": {"zone": "a"}}}})


def _task_shapes():
    """Task raws: full, each step of the maps' path null, and the maps absent."""
    shapes = [copy.deepcopy(TASK_FULL)]
    for null in ({"Pod": None}, {"Pod": {"metadata": None, "spec": None}},
                 {"Pod": {"metadata": {"labels": None, "annotations": None}, "spec": {"nodeSelector": None}}},
                 {"Pod": {"metadata": {}, "spec": {}}}, {"Resreq": None},
                 {"Resreq": {"MilliCPU": 2500, "Memory": 10, "ScalarResources": None}}):
        shape = copy.deepcopy(TASK_FULL)
        shape.update(null)
        shapes.append(shape)
    return shapes


def _node_shapes():
    shapes = [copy.deepcopy(NODE_FULL)]
    for null in ({"Node": None}, {"Node": {"metadata": None}}, {"Node": {"metadata": {"labels": None}}},
                 {"Idle": None}, {"Idle": {"MilliCPU": 0, "Memory": 0, "ScalarResources": None}},
                 {"Allocatable": {"MilliCPU": 8000, "Memory": 0, "ScalarResources": {"pods": None}}}):
        shape = copy.deepcopy(NODE_FULL)
        shape.update(null)
        shapes.append(shape)
    return shapes


def _views(policy_set, task_raw, node_raw):
    """The same task and node as decoded Structs (the wire path) and as views of plain dicts."""
    body = json.dumps({"task": task_raw, "node": node_raw}).encode()
    request = decode.decode_predicate(body, policy_set.reads)
    return [(request.task, request.node), (TaskView(task_raw), NodeView(node_raw))]


class Duck:
    """A root that is no wire view: plain attributes, as a test double or a tool may pass."""

    def __init__(self, view):
        for field in ("annotations", "labels", "node_selector", "idle", "requests", "allocatable"):
            setattr(self, field, getattr(view, field, None))


@pytest.mark.parametrize("reads", [MAP_READS, AMOUNT_READS], ids=["maps", "amounts"])
def test_short_reads_equal_the_views_fields_for_every_raw_shape_and_root_class(reads):
    policy_set = _policy(reads)
    rules = {r.name: r for r in policy_set._rules("filter")}
    expressions = {n: e.split(".", 1) for n, e in reads.items() if e != "free_gpu"}
    checked = 0
    for task_raw in _task_shapes():
        for node_raw in _node_shapes():
            # a Struct view, a dict view, a duck, and the Struct view again: the rules' remembered
            # class changes at each step
            struct, plain = _views(policy_set, task_raw, node_raw)
            for task, node in (struct, plain, (Duck(struct[0]), Duck(struct[1])), struct):
                for name, rule in rules.items():
                    got = _left(rule, task, node)
                    if name == "free":
                        want = node.idle.gpu
                    else:
                        root, rest = expressions[name]
                        obj = task if root == "task" else node
                        field, _, key = rest.partition("[")
                        if key:
                            value = getattr(obj, field)
                            want = value.get(key.strip('"]')) if isinstance(value, dict) else None
                        else:
                            field, short = rest.split(".")
                            want = getattr(getattr(obj, field), short)
                    assert (got, type(got)) == (want, type(want)), (name, task_raw, node_raw, type(task))
                    checked += 1
    assert checked == 7 * 7 * 4 * len(reads)


def test_the_map_reads_see_the_values_the_body_holds():
    """Not vacuous: the reads above find the values of the full body, and None where a step is null."""
    policy_set = _policy(MAP_READS)
    rules = {r.name: r for r in policy_set._rules("filter")}
    (task, node), _ = _views(policy_set, TASK_FULL, NODE_FULL)
    assert {n: _left(r, task, node) for n, r in rules.items()} == {"ann": "a", "lab": "web", "sel": "ssd",
                                                                   "node_lab": "a"}
    nulled = merged(TASK_FULL, {})
    nulled["Pod"] = None
    (task, node), _ = _views(policy_set, nulled, NODE_FULL)
    assert _left(rules["ann"], task, node) is None


def test_a_map_read_of_a_root_whose_field_is_no_map_is_null():
    """A root that is no wire view may hold anything in a map field: a list, a string, null."""
    policy_set = _policy(MAP_READS)
    rules = {r.name: r for r in policy_set._rules("filter")}
    (task, node), _ = _views(policy_set, TASK_FULL, NODE_FULL)
    for odd in (["zone"], "zone", None, 7):
        duck_task, duck_node = Duck(task), Duck(node)
        duck_task.annotations = duck_task.labels = duck_task.node_selector = duck_node.labels = odd
        assert all(_left(r, duck_task, duck_node) is None for r in rules.values()), odd
        assert _left(rules["ann"], task, node) == "a"  # and the wire view after it, read again


@pytest.mark.parametrize("guard, direct", [
    ('task.annotations["zone"] != null', True), ('task.labels["app"] == "web"', True),
    ('not (task.labels["app"] == "db")', True), ('node.idle.gpu >= 1 and task.labels["app"] != null', True),
    ('"web" in task.labels', True), ('task.labels["app"] == "web" or task.preemptable', True),
    # a bool field may read null (or, from a malformed body, another value): kept behind ``is True``
    ("task.preemptable", False)])
def test_a_guard_that_answers_true_or_false_is_the_rules_applies_itself(guard, direct):
    """One ``when`` guard built of comparisons, ``and``/``or``/``not`` or ``in`` answers True or
    False only, so it is used without the ``is True`` layer (``_all_true``); any other guard keeps
    it. Either way the rule applies exactly where the guard is true."""
    policy_set = compile_sources({"g.policy": f'filter g: node.labels["zone"] == "b"\n  when {guard}\n'})
    [rule] = policy_set._rules("filter")
    assert ("_all_true" not in rule.applies.__qualname__) is direct, rule.applies.__qualname__
    for labels, preemptable in (({"app": "web"}, False), ({"app": "db"}, False), ({"app": "db"}, True), ({}, None)):
        task = merged(TASK_FULL, {"Pod": {"metadata": {"labels": labels}}, "Preemptable": preemptable})
        if preemptable is None:  # Go never sends a bool null (a 400 on the wire): a view of a dict
            t, n = TaskView(task), NodeView(NODE_FULL)
        else:
            (t, n), _ = _views(policy_set, task, NODE_FULL)
        value = rule.applies(Context(None, [None] * 8, task=t, node=n))
        assert value is True or value is False, (guard, value)
        decision = policy_set.predicate(t, n, None)
        # the node is in zone "a": the rule refuses wherever it applies
        assert decision.fits is (not value), (guard, labels, preemptable)
