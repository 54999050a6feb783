"""Issue 47's team policy: inference pods spread across racks over several jobs of one cycle,
through ``cluster.nodes[].tasks`` (this cycle's placements among a node's tasks) and through
``session.allocations`` (an allocation's labels), each as a fixture run by ``policy-extender test``."""

from policy_extender.fixture_runner.runner import run_paths

from tests.support.fixture_dirs import write_policy_dir

SESSION = """\
      jobs:
        - {uid: ml/inf-a, queue: default, tasks: [{name: inf-a-0, labels: {app: inference}, requests: {gpu: 1}}]}
        - {uid: ml/inf-b, queue: default, tasks: [{name: inf-b-0, labels: {app: inference}, requests: {gpu: 1}}]}
        - {uid: ml/train, queue: default, tasks: [{name: train-0, labels: {app: train}, requests: {gpu: 1}}]}
      queues: [{name: default}]
      nodes:
        - {name: s1, labels: {rack: r1}, allocatable: {gpu: 8}}
        - {name: s2, labels: {rack: r2}, allocatable: {gpu: 8}}
"""

FIXTURES = """\
defaults:
  decision: score
  input:
    task: {name: inf-b-0, job: ml/inf-b, labels: {app: inference}, requests: {gpu: 1}}
    nodes: [{name: s1, labels: {rack: r1}}, {name: s2, labels: {rack: r2}}]
  session:
""" + SESSION + """\
cases:
  - name: rack spread sees this cycle's inference placements
    session:
      events:
        - {allocate: inf-a-0, node: s1}
    expect: {order: [s2, s1]}
  - name: a training pod does not count
    session:
      events:
        - {allocate: train-0, node: s1}
    expect: {scores: {s1: 10, s2: 10}}
  - name: an allocation discarded does not count
    session:
      events:
        - {allocate: inf-a-0, node: s1}
        - discard
    expect: {scores: {s1: 10, s2: 10}}
"""

BY_NODE_TASKS = """\
score rack-spread: 10 - sum(count(t for t in n.tasks if t.labels["app"] == "inference") for n in cluster.nodes if n.labels["rack"] == node.labels["rack"])
    when task.labels["app"] == "inference"
"""
BY_ALLOCATIONS = """\
score rack-spread: 10 - count(a for a in session.allocations if a.labels["app"] == "inference" and any(n.labels["rack"] == node.labels["rack"] for n in cluster.nodes if n.name == a.node))
    when task.labels["app"] == "inference"
"""


def _outcomes(tmp_path, policy: str) -> list[tuple[str, str, str]]:
    directory = write_policy_dir(tmp_path, policy=policy, fixtures=FIXTURES)
    return [(r.case.name, r.outcome, r.message) for r in run_paths([directory]).results]


def test_rack_spread_over_the_nodes_tasks(tmp_path):
    assert all(outcome == "PASS" for _, outcome, _ in _outcomes(tmp_path, BY_NODE_TASKS)), _outcomes(tmp_path, BY_NODE_TASKS)


def test_rack_spread_over_the_allocations_labels(tmp_path):
    assert all(outcome == "PASS" for _, outcome, _ in _outcomes(tmp_path, BY_ALLOCATIONS)), _outcomes(tmp_path, BY_ALLOCATIONS)


def test_a_fixtures_allocations_reach_the_rules_with_their_tasks_fields(tmp_path):
    """`session: allocations:` are allocateFunc events of compact tasks: their labels and role
    reach `session.allocations`, and the tasks join their node in `cluster.nodes`."""
    directory = write_policy_dir(tmp_path, policy="""\
filter probe: false
    reason "{count(a for a in session.allocations if a.labels['app'] == 'inference' and a.role == 'serve')} {sum(len(n.tasks) for n in cluster.nodes if n.name == 's1')}"
""", fixtures="""\
cases:
  - name: two inference pods placed on s1
    decision: filter
    input:
      task: {name: t, job: ml/inf-a}
      node: {name: s1}
    session:
      jobs: [{uid: ml/inf-a, queue: default}]
      queues: [{name: default}]
      nodes: [{name: s1}]
      allocations:
        - {name: a-0, job: ml/inf-a, node_name: s1, role: serve, labels: {app: inference}}
        - {name: a-1, job: ml/inf-a, node_name: s1, role: serve, labels: {app: inference}}
        - {name: b-0, job: ml/inf-a, node_name: s1, role: serve, labels: {app: train}}
    expect: {fits: false, rule: probe, reason: ": 2 3$"}
""")
    [result] = run_paths([directory]).results
    assert result.outcome == "PASS", result.message
