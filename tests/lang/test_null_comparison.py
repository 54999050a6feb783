"""``x == null`` and ``x != null`` (and ``null == x``) compile to a null test: the same answers as
the generic comparison (``runtime.equal``), and the same charge to the work budget; and a
string is charged its length over 64 wherever it is visited."""

import json

import pytest

from policy_extender.lang import runtime
from policy_extender.lang.budget import Budget
from policy_extender.lang.runtime import Context
from policy_extender.policyset import compile_sources
from policy_extender.wire import decode
from tests.lang.harness import NODE, TASK, merged

OPERANDS = ['task.annotations["a"]', 'task.annotations["missing"]', "task.annotations", "task.labels",
            "node.labels", "[1, 2]", "[]", "'text'", "''", "0", "1.5", "true", "false", "null",
            "task.requests.gpu", "task.job", "node.idle", "task.name"]
ANNOTATIONS = {"a": "x" * 640, "b": "y"}  # 640 characters: a charge of 10 when visited


def _compile(tests: dict[str, str]):
    lines = [f"filter {name}: {expr}" for name, expr in tests.items()]
    return compile_sources({"t.policy": "\n".join(lines) + "\n"})


def _roots(policy_set):
    task = merged(TASK, {"Pod": {"metadata": {"labels": {"l": "1"}, "annotations": ANNOTATIONS}}})
    body = json.dumps({"task": task, "node": merged(NODE, {})}).encode()
    request = decode.decode_predicate(body, policy_set.reads)
    return request.task, request.node


def _run(rule, task, node) -> tuple[object, int]:
    """The rule's test value and what it charged to the work budget."""
    c = Context(None, [None] * 8, task=task, node=node, budget=Budget())
    value = rule.test(c)
    return value, c.budget.spent


def _value(operand, task, node):
    """What the operand reads, from the views and literals (independently of the compiler)."""
    table = {'task.annotations["a"]': ANNOTATIONS["a"], 'task.annotations["missing"]': None,
             "task.annotations": task.annotations, "task.labels": task.labels, "node.labels": node.labels,
             "[1, 2]": [1, 2], "[]": [], "'text'": "text", "''": "", "0": 0, "1.5": 1.5, "true": True,
             "false": False, "null": None, "task.requests.gpu": task.requests.gpu, "task.job": None,
             "node.idle": node.idle, "task.name": task.name}
    return table[operand]


@pytest.mark.parametrize("operand", OPERANDS)
def test_null_tests_answer_and_charge_as_the_generic_equality(operand):
    policy_set = _compile({"eq": f"{operand} == null", "ne": f"{operand} != null",
                           "eq_left": f"null == {operand}", "ne_left": f"null != {operand}"})
    rules = {r.name: r for r in policy_set._rules("filter")}
    task, node = _roots(policy_set)
    value = _value(operand, task, node)
    # runtime.equal(_spent(left), right): the left operand is charged when it is a list, map or string
    charge = runtime.cost(value) if type(value) in (list, dict, str) else 0
    for name, want, charged in (("eq", value is None, charge), ("ne", value is not None, charge),
                                ("eq_left", value is None, 0), ("ne_left", value is not None, 0)):
        got, spent = _run(rules[name], task, node)
        assert got is want, (operand, name, got)
        assert spent == charged, (operand, name, spent)


def test_the_long_annotation_is_charged():
    """The charge above is not vacuous: the 640-character value costs 10 when compared to null."""
    policy_set = _compile({"ne": 'task.annotations["a"] != null'})
    task, node = _roots(policy_set)
    assert _run(policy_set._rules("filter")[0], task, node) == (True, 10)


def test_a_guard_on_a_missing_annotation_skips_the_rule_and_a_present_one_applies():
    policy_set = compile_sources({"z.policy": (
        'filter zone: node.labels["zone"] == task.annotations["zone"]\n'
        '  when task.annotations["zone"] != null\n')})
    for annotations, labels, fits in (({}, {}, True), ({"zone": "a"}, {"zone": "a"}, True),
                                      ({"zone": "a"}, {"zone": "b"}, False), ({"zone": "a"}, {}, False)):
        task = merged(TASK, {"Pod": {"metadata": {"annotations": annotations}}})
        node = merged(NODE, {"Node": {"metadata": {"labels": labels}}})
        request = decode.decode_predicate(json.dumps({"task": task, "node": node}).encode(), policy_set.reads)
        assert policy_set.predicate(request.task, request.node, None).fits is fits, (annotations, labels)


@pytest.mark.parametrize("length", [0, 1, 63, 64, 127, 128, 640, 65536])
def test_a_container_string_is_charged_its_length_over_64(length):
    """``_spent`` (here the container of ``in``) charges a string ``len // 64`` (``runtime.cost``),
    a shorter one nothing, through its own fast path."""
    policy_set = _compile({"in": '"z" in task.annotations["s"]'})
    task = merged(TASK, {"Pod": {"metadata": {"annotations": {"s": "x" * length}}}})
    body = json.dumps({"task": task, "node": merged(NODE, {})}).encode()
    request = decode.decode_predicate(body, policy_set.reads)
    rule = policy_set._rules("filter")[0]
    assert _run(rule, request.task, request.node) == (False, runtime.cost("x" * length))
    assert runtime.cost("x" * length) == length // 64
