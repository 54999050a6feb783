"""Each rule's estimated cost per call (lang/cost.py) and W501 for the quadratic ones (issue 47 item 4).

The estimate is a polynomial in nodes (N), this cycle's allocations (A), tasks of a job (J), tasks
on a node (T) and queues (Q); the goldens of W501's text are tests/lang/cases/cost.yaml."""

from __future__ import annotations

import pytest

from policy_extender.policyset import compile_sources

SHAPES = [  # (rule, estimate, quadratic)
    ("filter f: node.idle.gpu >= task.requests.gpu", "1", False),
    ("filter f: count(t for t in node.tasks if t.priority > 3) < 5", "T", False),
    ("enqueue e: count(n for n in cluster.nodes if n.idle.gpu >= 8) >= 2", "N", False),
    ("enqueue e: count(a for a in session.allocations if a.job == job.uid) < 4", "A", False),
    ("ready r: count(t for t in job.tasks if t.node_name != \"\") >= job.min_available", "J", False),
    ("score s: node.idle.gpu", "N", False),  # evaluated once per node of the call
    ("score s: session.node.tasks", "N", False),
    ("score s: count(t for t in node.tasks if t.priority > 3)", "N·T", False),  # the call's nodes x their pods: linear
    ("victim v: count(t for t in evictee.job.tasks if t.priority > 3) < 2", "J·T", False),
    ("score s: count(m for m in cluster.nodes if m.ready)", "N^2", True),
    ("score s: count(a for a in session.allocations if a.node == node.name)", "N·A", True),
    ("enqueue e: count(n for n in cluster.nodes if any(a.node == n.name for a in session.allocations)) < 10", "N·A", True),
    ("enqueue e: sum(count(t for t in n.tasks if t.priority > 3) for n in cluster.nodes) < 100", "N·T", False),
    ("score s: sum(count(t for t in n.tasks) for n in cluster.nodes if n.labels[\"rack\"] == node.labels[\"rack\"])",
     "N^2·T", True),
    ("overused o: count(q for q in values(cluster.queues) if q.allocated.gpu > 0) > 3", "Q", False),
    ("let nodes = cluster.nodes\nenqueue e: count(n for n in nodes if n.ready) > 2", "N", False),
    ("filter f: \"gpu\" in keys(node.labels)", "1", False),
]


@pytest.mark.parametrize("text,estimate,quadratic", SHAPES, ids=[s[0].split(": ", 1)[-1][:60] for s in SHAPES])
def test_each_rule_gets_an_estimate_in_the_clusters_sizes(text, estimate, quadratic):
    policy_set = compile_sources({"c.policy": text + "\n"})
    [cost] = policy_set.costs
    assert (cost.text(), cost.degree >= 2) == (estimate, quadratic)
    assert [w.code for w in policy_set.warnings] == (["W501"] if quadratic else [])


def test_the_estimate_at_a_size_is_each_terms_product():
    [cost] = compile_sources({"c.policy": "score s: count(m for m in cluster.nodes if m.ready) + "
                                          "count(t for t in node.tasks if t.priority > 1)\n"}).costs
    assert cost.text() == "N^2 + N·T"
    assert cost.at({"N": 1000, "T": 30, "A": 0, "J": 0, "Q": 0}) == 1000 * 1000 + 1000 * 30


def test_the_warning_points_at_the_aggregate_that_makes_the_rule_quadratic():
    text = "enqueue cap: count(n for n in cluster.nodes if any(a.node == n.name for a in session.allocations)) < 10\n"
    [warning] = compile_sources({"cap.policy": text}).warnings
    assert (warning.code, warning.severity, warning.span.line, warning.span.column) == ("W501", "warning", 1, 48)
    assert "session.nodes[n.name].tasks" in warning.hint
