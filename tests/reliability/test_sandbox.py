"""The sandbox: every attack on the language is refused at load time or bounded at run time,
with its exact error code and message. A generous wall-clock ceiling guards against hangs only.

Refused at load time: reaching Python internals through names, attributes, indexes, builtins or
reason templates; ``**``; out-of-range literals; regex constructs that need a backtracking engine
(every other pattern runs on RE2, in linear time: tests/lang/test_regex.py).
Bounded at run time (EvalError, the service answers 500): runaway arithmetic, giant strings and
lists, aggregates over huge collections, nested aggregates.
"""

from __future__ import annotations

import json
import time

import pytest

from policy_extender.errors import EvalError, PolicyError
from policy_extender.policyset import compile_sources
from policy_extender.wire import decode
from policy_extender.wire.session_views import NO_SESSION
from tests.tools.views import evaluate_in_and_out_of_session, sample

HANG_GUARD = 20.0  # seconds


def doubled(name: str, seed: str, times: int) -> str:
    """Lets that double ``seed`` ``times`` times: ``{name}{times}`` has 2**times copies of it."""
    return "\n".join([f"let {name}0 = {seed}"] + [f"let {name}{i} = {name}{i - 1} + {name}{i - 1}"
                                                  for i in range(1, times + 1)]) + "\n"


REFUSED = [  # (attack, policy text, code, message)
    ("dunder attribute", "filter a: task.__class__ == null", "E201", "unknown field '__class__' on task"),
    ("globals attribute", "filter a: task.__globals__ == null", "E201", "unknown field '__globals__' on task"),
    ("mro attribute", "filter a: node.mro == null", "E201", "unknown field 'mro' on node"),
    ("dunder index", 'filter a: task["__class__"] == null', "E309", "a task cannot be indexed with [...]"),
    ("builtins name", "filter a: __builtins__ == null", "E202", "unknown name '__builtins__'"),
    ("import name", "filter a: __import__ == null", "E202", "unknown name '__import__'"),
    ("getattr builtin", 'filter a: getattr(task, "__class__") == null', "E203", "unknown function 'getattr'"),
    ("eval builtin", 'filter a: eval("1") == 1', "E203", "unknown function 'eval' (did you mean 'values'?)"),
    ("exec builtin", 'filter a: exec("1") == null', "E203", "unknown function 'exec'"),
    ("format field in reason", 'filter a: false\n    reason "{0.__class__}"', "E301",
     "a number has no fields (reading '.__class__')"),
    ("dunder in reason", 'filter a: false\n    reason "{task.__class__.__init__}"', "E201",
     "unknown field '__class__' on task"),
    ("power tower", "filter a: 10 ** 10 ** 10 > 1", "E104", "there is no '**' operator"),
    ("huge literal", "filter a: 99999999999999999999 > 1", "E503", "number 99999999999999999999 is out of range (limit 2^63)"),
    ("literal past int()'s 4,300 digits", "filter a: " + "9" * 5000 + " > 1", "E503",
     "number " + "9" * 5000 + " is out of range (limit 2^63)"),
    ("literal with a huge exponent", "filter a: 1e999999999 > 1", "E503", "number 1e999999999 is out of range (limit 2^63)"),
    ("backreference", 'filter a: matches(task.name, "(a*)\\\\1")', "E504",
     "regex '(a*)\\\\1' uses a backreference (at character 5), which RE2, the linear-time engine of "
     "matches(), does not have: compare the parts with == after split(), or list the allowed values with |: "
     "a backreference needs a backtracking engine"),
    ("lookahead", 'filter a: matches(task.name, "a(?=a*b)")', "E504",
     "regex 'a(?=a*b)' uses a lookahead (at character 2), which RE2, the linear-time engine of matches(), "
     "does not have: split the test in two: matches(s, \"A\") and not matches(s, \"B\")"),
    ("regex from data", "filter a: matches(task.name, task.name)", "E306",
     "argument 2 of matches() must be a literal"),
]


@pytest.mark.parametrize("attack,text,code,message", REFUSED, ids=[r[0] for r in REFUSED])
def test_refused_at_load_time(attack, text, code, message):
    started = time.monotonic()
    with pytest.raises(PolicyError) as caught:
        compile_sources({"attack.policy": text + "\n"})
    assert time.monotonic() - started < HANG_GUARD
    assert [(d.code, d.message) for d in caught.value.diagnostics][:1] == [(code, message)]


BOUNDED = [  # (attack, policy text, code, message)
    ("multiplication chain", "filter a: task.priority + 4294967296 * 4294967296 * 4294967296 > 0", "E510",
     "number out of range (limit 2^63): 18446744073709551616"),
    ("float overflow", "filter a: task.priority + 3e18 * 3e18 * 3e18 > 0", "E510", "number out of range (limit 2^63): 9e+36"),
    ("giant string", doubled("s", '"ab"', 16) + "filter a: len(s16) > 0", "E511",
     "result of 131072 elements is longer than 65536"),
    ("giant list", doubled("l", str(list(range(40))), 11) + "filter a: len(l11) > 0", "E511",
     "result of 81920 elements is longer than 65536"),
    ("giant join", doubled("l", '["abcd"]', 10) + 'filter a: len(join(l10, "' + "x" * 70 + '")) > 0', "E511",
     "result of 75706 elements is longer than 65536"),
    ("nested aggregates", doubled("s", '"a"', 13) + 'let l = split(s13, "")\n'
     "filter a: sum(sum(1 for y in l) for x in l) > 0", "E512",
     "the call visited more than 1000000 elements (nested aggregates, list operations inside one, or an "
     "aggregate in a rule evaluated once per node or evictee); limit 1000000"),
    ("membership in an aggregate", doubled("s", '"a"', 15) + 'let l = split(s15, "")\n'
     'filter a: all("b" not in l for x in l)', "E512",
     "the call visited more than 1000000 elements (nested aggregates, list operations inside one, or an "
     "aggregate in a rule evaluated once per node or evictee); limit 1000000"),
]


@pytest.mark.parametrize("attack,text,code,message", BOUNDED, ids=[r[0] for r in BOUNDED])
@pytest.mark.slow
def test_bounded_at_run_time(attack, text, code, message):
    policy = compile_sources({"attack.policy": text + "\n"})
    started = time.monotonic()
    with pytest.raises(EvalError) as caught:
        evaluate_in_and_out_of_session(policy)
    assert time.monotonic() - started < HANG_GUARD
    assert (caught.value.code, caught.value.message) == (code, message)


def node_with_tasks(count: int) -> bytes:
    body = json.loads(sample("predicate"))
    template = next(iter(body["node"]["Tasks"].values()))
    small = {k: template[k] for k in ("UID", "Name", "Namespace", "Priority", "Status")}
    body["node"]["Tasks"] = {f"ns/p{i}": {**small, "UID": f"u{i}", "Priority": i % 7} for i in range(count)}
    return json.dumps(body).encode()


@pytest.mark.slow
def test_an_aggregate_over_a_node_with_200k_tasks_is_bounded():
    policy = compile_sources({"a.policy": "filter a: count(t for t in node.tasks if t.priority > 3) < 5\n"})
    request = decode.decode_predicate(node_with_tasks(200_000), policy.reads)
    started = time.monotonic()
    with pytest.raises(EvalError) as caught:
        policy.predicate(request.task, request.node, NO_SESSION)
    assert time.monotonic() - started < HANG_GUARD
    assert (caught.value.code, caught.value.message) == ("E512", "aggregate over 200000 elements (limit 100000)")
    assert caught.value.rule == "a"


SAFE = [  # text that looks like an attack but only reads data: (attack, rule, expected reason)
    ("dunder map key", 'filter a: task.labels.__class__ != null',
     "a (attack.policy:1): task.labels.__class__ null == null"),
    ("dunder resource", 'filter a: node.idle["__class__"] != 0',
     'a (attack.policy:1): node.idle["__class__"] 0 == 0'),
    ("percent format", 'filter a: false\n    reason "%s %(x)s %n {task.name}"',
     None),
]


@pytest.mark.parametrize("attack,text,reason", SAFE, ids=[s[0] for s in SAFE])
def test_look_alike_text_only_reads_data(attack, text, reason):
    policy = compile_sources({"attack.policy": text + "\n"})
    request = decode.decode_predicate(sample("predicate"), policy.reads)
    decision = policy.predicate(request.task, request.node, NO_SESSION)
    expected = reason or f"a (attack.policy:1): %s %(x)s %n {json.loads(sample('predicate'))['task']['Name']}"
    assert (decision.fits, decision.reason) == (False, expected)
