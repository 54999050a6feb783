"""The ``cluster`` root: readable in every rule kind, typed and checked like the rest, and its
reads recorded (they decide what the session snapshot keeps: ``wire.snapshot.node_keys``)."""

from __future__ import annotations

import pytest

from policy_extender import schema
from policy_extender.errors import PolicyError
from policy_extender.policyset.compile import compile_sources

#: one rule of each kind reading a cluster fact
EACH_KIND = {
    "filter": "filter r: sum(n.idle.gpu for n in cluster.nodes if n.labels[\"pool\"] == \"a100\") >= task.requests.gpu",
    "score": "score r: cluster.idle.gpu - count(n for n in cluster.nodes if n.ready)",
    "victim": "victim r: cluster.used.cpu > cluster.allocatable.cpu / 2",
    "preemptable": "preemptable r: cluster.node_count > 3",
    "reclaimable": "reclaimable r: (cluster.jobs[\"research\"].pending ?? 0) > 0",
    "enqueue": "enqueue r: cluster.idle.gpu >= 4\n    when job.queue_name == \"research\"",
    "overused": "overused r: queue.allocated.gpu > cluster.queues[\"research\"].deserved.gpu",
    "ready": "ready r: cluster.jobs[queue.name].running < 10",
}


def test_every_rule_kind_has_the_cluster_root():
    assert set(EACH_KIND) == set(schema.DECISION_ROOTS)
    assert all(roots.get("cluster") == "cluster" for roots in schema.DECISION_ROOTS.values())


@pytest.mark.parametrize("kind", sorted(EACH_KIND))
def test_each_rule_kind_reads_cluster_facts(kind):
    policy_set = compile_sources({"c.policy": EACH_KIND[kind] + "\n"})
    assert policy_set.kinds == {kind}
    assert policy_set.reads["cluster"], "a rule reading cluster facts records its reads"


def _errors(text: str) -> list[tuple[str, str]]:
    with pytest.raises(PolicyError) as caught:
        compile_sources({"c.policy": text})
    return [(d.code, d.message) for d in caught.value.diagnostics]


@pytest.mark.parametrize("text,code,words", [
    ("enqueue r: cluster.idle_gpu >= 4\n", "E201", "unknown field 'idle_gpu' on cluster"),
    ("enqueue r: cluster.idl.gpu >= 4\n", "E201", "did you mean 'idle'"),
    ("enqueue r: cluster.idle.gpus >= 4\n", "E201", "unknown field 'gpus' on resources"),
    ("enqueue r: cluster.jobs[\"a\"].runing > 0\n", "E201", "did you mean 'running'"),
    ("enqueue r: cluster.queues[\"a\"].wieght > 0\n", "E201", "did you mean 'weight'"),
    ("filter r: any(n.labls[\"a\"] == \"b\" for n in cluster.nodes)\n", "E201", "did you mean 'labels'"),
])
def test_unknown_cluster_fields_are_refused_with_a_suggestion(text, code, words):
    errors = _errors(text)
    assert any(c == code and words in m for c, m in errors), errors


@pytest.mark.parametrize("text,code,words", [
    ("enqueue r: cluster.idle >= 4\n", "E302", "orders a resources with a number"),
    ("enqueue r: cluster.nodes > 1\n", "E302", "orders a list[node] with a number"),
    ("enqueue r: cluster.node_count == \"3\"\n", "E302", "compares a number with a string"),
    ("enqueue r: sum(n.labels for n in cluster.nodes) > 0\n", "E306", "this is a map[string]"),
    ("enqueue r: cluster.jobs > 0\n", "E302", "orders a map[jobcounts] with a number"),
])
def test_cluster_values_are_typed(text, code, words):
    errors = _errors(text)
    assert [c for c, _ in errors] == [code] and words in errors[0][1], errors


def test_cluster_values_have_their_types():
    compile_sources({"c.policy": (
        "let gpus = sum(n.idle.gpu for n in cluster.nodes if n.labels[\"pool\"] == \"a100\")\n"
        "let queues = count(q for q in values(cluster.queues) if q.allocated.gpu > 0)\n"
        "enqueue r: gpus + queues + cluster.node_count + cluster.idle[\"nvidia.com/gpu\"] "
        "+ cluster.jobs[\"a\"].total > 0 and cluster.queues[\"a\"].state == \"Open\"\n")})


def test_what_a_rule_reads_on_cluster_is_recorded_as_snapshot_paths():
    reads = compile_sources({"c.policy": (
        "enqueue idle: cluster.idle.gpu >= 4\n"
        "filter pool: count(n for n in cluster.nodes if n.labels[\"pool\"] == \"a100\") > 1\n"
        "ready jobs: cluster.jobs[\"a\"].pending < 3\n"
        "overused queues: cluster.queues[\"a\"].deserved.gpu < 1\n")}).reads
    assert {("Nodes", "*", "Idle", "ScalarResources"), ("Nodes", "*", "Node", "metadata", "labels"),
            ("Jobs", "*", "PodGroup", "status", "phase"), ("Queues", "*")} <= reads["cluster"]
    # what is read on a snapshot node (job, queue) is read on every node (job, queue) decoded
    assert {("Idle", "ScalarResources"), ("Node", "metadata", "labels")} <= reads["node"]
    assert ("PodGroup", "status", "phase") in reads["job"]
    assert ("Queue", "spec", "deserved") in reads["queue"]


def test_a_set_that_reads_no_cluster_fact_records_no_cluster_read():
    reads = compile_sources({"c.policy": "enqueue r: job.total_request.gpu <= 16\n"
                                         "overused o: session.queue.gpu > 2\n"}).reads
    assert not reads["cluster"]
    assert not reads["node"]
