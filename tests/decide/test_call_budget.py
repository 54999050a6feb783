"""One budget per call, not per evaluation (issue 44 item 4; ``lang/budget.py``).

Prioritize evaluates each score rule once per node. With a budget per evaluation, a rule linear
in ``cluster.nodes`` visited N x N elements in one call (1.5 s at 1,000 nodes) and a quadratic
one N^3 (not finished in 300 s). Now every evaluation of a call draws on one budget of
``MAX_WORK`` elements (E512), and a call Volcano gave up on stops at its deadline (E513). The
cases assert counts and codes; how long they took before and after is ``python -m bench.cpu.call_budget``.
"""

from __future__ import annotations

import json
import time

import pytest

from policy_extender.decide.handlers import respond
from policy_extender.errors import EvalError
from policy_extender.fixture_runner.exchange import Exchanger
from policy_extender.lang import budget
from policy_extender.policyset import compile_sources
from policy_extender.verb_names.volcano import ON_SESSION_OPEN
from policy_extender.wire import compact, decode

LINEAR = "score linear: count(m for m in cluster.nodes if m.ready)\n"
QUADRATIC = ("score quadratic: sum(count(m for m in cluster.nodes if m.name == n.name) "
             "for n in cluster.nodes if n.name != node.name)\n")


def nodes(count: int) -> list[dict]:
    return [{"name": f"n{i:04d}"} for i in range(count)]


def opened(policy: str, node_count: int) -> tuple[Exchanger, bytes]:
    """A service with ``policy`` and a session of ``node_count`` nodes; the prioritize body over them all."""
    exchanger = Exchanger(compile_sources({"cost.policy": policy}))
    open_body = compact.session_body([{"name": "j", "tasks": [{"name": "t"}]}], [{"name": "q"}], nodes(node_count))
    exchanger.call(ON_SESSION_OPEN, json.dumps(open_body).encode())
    body = json.dumps(compact.prioritize_body({"name": "t", "job": "j"}, nodes(node_count))).encode()
    return exchanger, body


def prioritize(exchanger: Exchanger, body: bytes, deadline: float | None = None):
    reply = respond(exchanger.service, "prioritize", body, deadline)
    return reply.status, json.loads(reply.body)


@pytest.mark.slow  # a million elements visited: 1.5-6 s
def test_a_rule_linear_in_the_nodes_fits_while_the_call_stays_under_the_budget():
    exchanger, body = opened(LINEAR, 999)  # 999 evaluations x 999 nodes = 998,001 elements
    status, answer = prioritize(exchanger, body)
    assert status == 200 and set(answer["nodeScore"].values()) == {999.0}


@pytest.mark.slow  # a million elements visited: 1.5-6 s
def test_a_rule_linear_in_the_nodes_errs_once_the_call_passes_the_budget():
    exchanger, body = opened(LINEAR, 1001)  # 1,002,001: each evaluation alone was under the old per-evaluation budget
    status, answer = prioritize(exchanger, body)
    assert status == 500
    assert "E512" in answer["error"] and "the call visited more than 1000000 elements" in answer["error"]


@pytest.mark.slow  # a million elements visited: 1.5-6 s
@pytest.mark.parametrize("node_count", [101, 1000])
def test_a_quadratic_rule_stops_at_the_budget_however_many_nodes(node_count):
    # 1,000 nodes: 10^9 elements, not finished in 300 s with a budget per evaluation
    exchanger, body = opened(QUADRATIC, node_count)
    ps, env = exchanger.policy_set, exchanger.service.session_cache.env()
    decoded = decode.decode_prioritize(body, ps.reads, env)
    previous = budget.begin()
    try:
        with pytest.raises(EvalError) as caught:
            ps.prioritize(decoded.task, decoded.nodes, env)
        spent = budget.current().spent
    finally:
        budget.end(previous)
    assert caught.value.code == "E512" and caught.value.rule == "quadratic"
    assert spent == budget.MAX_WORK  # stopped at the first charge past it, not after the call's whole work


@pytest.mark.slow  # a million elements visited: 1.5-6 s
def test_outside_a_call_prioritize_still_shares_one_budget_across_its_nodes():
    exchanger, body = opened(LINEAR, 1001)
    ps, env = exchanger.policy_set, exchanger.service.session_cache.env()
    decoded = decode.decode_prioritize(body, ps.reads, env)
    with pytest.raises(EvalError) as caught:  # no budget.begin(): PolicySet.prioritize takes one for the call
        ps.prioritize(decoded.task, decoded.nodes, env)
    assert caught.value.code == "E512"


def test_a_call_past_its_deadline_stops_at_its_next_look_at_the_clock_and_answers_500():
    exchanger, body = opened(LINEAR, 50)
    status, answer = prioritize(exchanger, body, deadline=time.monotonic() - 0.001)
    assert status == 500
    assert "E513" in answer["error"] and "the scheduler no longer waits for this answer" in answer["error"]
    assert "(rule linear)" in answer["error"]


def test_a_call_within_its_deadline_answers():
    exchanger, body = opened(LINEAR, 50)
    status, answer = prioritize(exchanger, body, deadline=time.monotonic() + 3600)
    assert status == 200 and set(answer["nodeScore"].values()) == {50.0}


def test_a_call_that_charges_nothing_never_reads_the_clock():
    exchanger, body = opened("score plain: node.idle.cpu\n", 50)
    status, _ = prioritize(exchanger, body, deadline=time.monotonic() - 10)  # cheap: it answers anyway
    assert status == 200


@pytest.mark.slow  # a million elements visited: 1.5-6 s
def test_each_call_starts_with_a_full_budget():
    exchanger, body = opened(LINEAR, 999)
    for _ in range(3):  # 998,001 each: a budget carried over would fail the second
        assert prioritize(exchanger, body)[0] == 200
