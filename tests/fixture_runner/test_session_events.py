"""A fixture session lists events in order (allocate, deallocate, evict, discard, commit), sent
as Volcano's Statement sends them, so rules over this cycle's allocations and evictions are tested
through preempt and reclaim; a bad event is an error at its file:line:col."""

import json
import textwrap

import pytest

from policy_extender.fixture_runner import bodies
from policy_extender.fixture_runner.loader import load_file
from policy_extender.fixture_runner.runner import run_paths

from tests.support.fixture_dirs import write_policy_dir

POLICY = """\
# at most one task evicted per node in a cycle (preempt and reclaim)
victim one-per-node: count(a for a in session.evictions if a.node == evictee.node_name) < 1
    reason "{evictee.node_name} already gave up a task this cycle"
# reclaim never takes from a node that received a task this cycle
reclaimable not-fresh: count(a for a in session.allocations if a.node == evictee.node_name) == 0
"""

SESSION = """\
defaults:
  decision: preemptable
  input:
    evictor: {name: urgent-0, priority: 100}
    evictees: [{name: old-1, job: ml/old, node: n1}]
  session:
    jobs:
      - {uid: ml/new, queue: q, tasks: [{name: new-0, requests: {gpu: 1}}, {name: new-1}]}
      - {uid: ml/old, queue: q}
    queues: [{name: q}]
    nodes:
      - {name: n1, tasks: [{name: old-0, job: ml/old}, {name: old-1, job: ml/old}]}
      - {name: n2}
cases:
"""


def run(tmp_path, cases: str, policy: str = POLICY):
    fixtures = SESSION + textwrap.indent(textwrap.dedent(cases), "  ")
    directory = write_policy_dir(tmp_path / "p", policy=policy, fixtures=fixtures, name="events")
    return run_paths([directory]).results


def outcomes(results):
    return [(r.case.name, r.outcome, r.message) for r in results]


def test_each_event_kind_reaches_the_victim_rules_of_preempt_and_reclaim(tmp_path):
    results = run(tmp_path, """\
        - name: nothing evicted yet
          expect: {status: permit, victims: [old-1]}
        - name: evict
          session: {events: [{evict: old-0}]}
          expect: {status: permit, victims: []}
        - name: discard unevicts
          session: {events: [{evict: old-0}, discard]}
          expect: {status: permit, victims: [old-1]}
        - name: commit ends the statement a discard undoes
          session: {events: [{evict: old-0}, commit, {allocate: new-0, node: n2}, discard]}
          expect: {status: permit, victims: []}
        - name: reclaim after an allocation on the node
          decision: reclaimable
          session: {events: [{allocate: new-0, node: n1}]}
          expect: {status: permit, victims: []}
        - name: reclaim after the allocation was deallocated
          decision: reclaimable
          session: {events: [{allocate: new-0, node: n1}, {deallocate: new-0}]}
          expect: {status: permit, victims: [old-1]}
        - name: discard unallocates
          decision: reclaimable
          session: {events: [{allocate: new-0, node: n1}, {allocate: new-1, node: n2}, discard]}
          expect: {status: permit, victims: [old-1]}
    """)
    assert [(name, outcome) for name, outcome, _ in outcomes(results)] == [
        ("nothing evicted yet", "PASS"), ("evict", "PASS"), ("discard unevicts", "PASS"),
        ("commit ends the statement a discard undoes", "PASS"),
        ("reclaim after an allocation on the node", "PASS"),
        ("reclaim after the allocation was deallocated", "PASS"), ("discard unallocates", "PASS"),
    ], outcomes(results)


def test_a_failing_expectation_after_events_fails_with_the_rules_explanation(tmp_path):
    [result] = run(tmp_path, """\
        - name: wrongly expects the victim
          session: {events: [{evict: old-0}]}
          expect: {status: permit, victims: [old-1]}
    """)
    assert result.outcome == "FAIL", result.message
    assert "n1 already gave up a task this cycle" in result.explanation


def test_the_calls_are_those_of_volcanos_statement(tmp_path):
    """Allocate: allocateFunc, the task on its node, Allocated; deallocate (unallocate):
    deallocateFunc, Pending; evict: deallocateFunc, the task on its node, Releasing; discard
    undoes the statement last first (unevict is allocateFunc, Running); commit sends nothing."""
    write_policy_dir(tmp_path / "p", policy=POLICY, name="events", fixtures=SESSION + textwrap.indent(textwrap.dedent("""\
        - name: all kinds
          session:
            events:
              - {allocate: new-0, node: n1}
              - {deallocate: new-0}
              - {allocate: new-0, node: n2}
              - commit
              - {evict: default/old-0}
              - {allocate: new-1, node: n1}
              - discard
          expect: {status: permit}
    """), "  "))
    [case] = load_file(tmp_path / "p" / "events.fixtures.yaml")
    assert case.error is None, case.error
    _, allocations, calls = bodies.session_bodies(case)
    assert allocations == []
    sent = [(verb, task["Name"], task["NodeName"], task["Status"], task["Job"])
            for verb, task in ((verb, json.loads(body)["task"]) for verb, body in calls)]
    assert sent == [
        ("allocateFunc", "new-0", "n1", 2, "ml/new"),
        ("deallocateFunc", "new-0", "n1", 1, "ml/new"),
        ("allocateFunc", "new-0", "n2", 2, "ml/new"),
        ("deallocateFunc", "old-0", "n1", 64, "ml/old"),
        ("allocateFunc", "new-1", "n1", 2, "ml/new"),
        ("deallocateFunc", "new-1", "n1", 1, "ml/new"),   # discard: the last first (unallocate)
        ("allocateFunc", "old-0", "n1", 32, "ml/old"),    # then unevict
    ]
    resreq = json.loads(calls[0][1])["task"]["Resreq"]
    assert resreq["ScalarResources"]["nvidia.com/gpu"] == 1000  # the snapshot's own TaskInfo


def test_events_run_against_a_raw_onsessionopen_body(tmp_path, sample):
    directory = tmp_path / "p"
    sample("onSessionOpen.json", directory / "captured")
    write_policy_dir(directory, policy=POLICY, name="events", fixtures="""\
        cases:
          - name: a task of the captured snapshot is evicted
            decision: preemptable
            input:
              evictor: {name: urgent-0, priority: 100}
              evictees: [{name: other, node: node-0000}]
            session:
              body_file: captured/onSessionOpen.json
              events: [{evict: team-a/run-0001-worker-0}]
            expect: {status: permit, victims: []}
          - name: the same, discarded
            decision: preemptable
            input:
              evictor: {name: urgent-0, priority: 100}
              evictees: [{name: other, node: node-0000}]
            session:
              body_file: captured/onSessionOpen.json
              events: [{evict: run-0001-worker-0}, {allocate: job-001-worker-0, node: node-0004}, discard]
            expect: {status: permit, victims: [other]}
    """)
    assert [(n, o) for n, o, _ in outcomes(run_paths([directory]).results)] == [
        ("a task of the captured snapshot is evicted", "PASS"), ("the same, discarded", "PASS")]


BAD_EVENTS = [
    ("[{evicts: old-0}]", 19, 17, "unknown event 'evicts' (did you mean 'evict'?): an event is one of"),
    ("[dicsard]", 19, 16, "unknown event 'dicsard' (did you mean 'discard'?)"),
    ("[{evict: nobody}]", 19, 17, "evict event: task 'nobody' is not in the session: an event names a task "
                                  "of the session's jobs or nodes by name, namespace/name or uid (the session's "
                                  "tasks: new-0, new-1, old-0, old-1)"),
    ("[{allocate: new-0}]", 19, 17, "allocate event: it needs `node:`, the name of the node of the session"),
    ("[{allocate: new-0, node: n9}]", 19, 34, "allocate event: node 'n9' is not in the session: allocate places "
                                              "a task on a node of the snapshot (the session's nodes: n1, n2)"),
    ("[{evict: new-0}]", 19, 17, "evict event: task 'new-0' runs on no node in the session snapshot"),
    ("[{allocate: old-0, node: n2}]", 19, 17, "allocate event: task 'old-0' already runs on n1 in the session snapshot"),
    ("[{deallocate: new-0}]", 19, 17, "deallocate event: task 'new-0' is not allocated in this cycle: "
                                      "deallocate undoes an earlier allocate event"),
    ("[{evict: old-0}, {evict: old-0}]", 19, 33, "evict event: task 'old-0' was already evicted by the event at line 19"),
    ("[{evict: old-0}, {deallocate: old-0}]", 19, 33, "deallocate event: task 'old-0' was evicted by the event at "
                                                      "line 19: deallocate undoes an allocate event"),
    ("[{allocate: new-0, node: n1}, {evict: new-0}]", 19, 46, "evict event: task 'new-0' was already allocated on n1 "
                                                              "by the event at line 19: `deallocate` undoes"),
    ("[discard]", 19, 16, "discard event: nothing to discard"),
    ("[{evict: old-0}, commit, discard]", 19, 40, "discard event: nothing to discard"),
    ("[allocate]", 19, 16, "an allocate event names a task: `- {allocate: TASK, node: NODE}`"),
    ("[{evict: old-0, node: n1}]", 19, 31, "only allocate takes `node:`"),
    ("[{evict: old-0, allocate: new-0}]", 19, 31, "an event has one kind"),
    ("{evict: old-0}", 19, 7, "session `events:` is a list of events, in order"),
]


@pytest.mark.parametrize("events, line, column, message", BAD_EVENTS, ids=[b[0] for b in BAD_EVENTS])
def test_a_bad_event_is_an_error_at_its_line_and_column(tmp_path, events, line, column, message):
    results = run(tmp_path, f"""\
        - name: good
          expect: {{status: permit, victims: [old-1]}}
        - name: bad
          session:
            events: {events}
          expect: {{status: permit}}
    """)
    assert [(r.case.name, r.outcome) for r in results] == [("good", "PASS"), ("bad", "ERROR")], results[1].message
    where = f"events.fixtures.yaml:{line}:{column}: "
    assert where + message in results[1].message, results[1].message


def test_a_name_two_tasks_share_must_be_given_with_its_namespace(tmp_path):
    directory = write_policy_dir(tmp_path / "p", policy=POLICY, name="events", fixtures="""\
        cases:
          - name: ambiguous
            decision: preemptable
            input: {evictor: {name: e}, evictees: [{name: x, node: n1}]}
            session:
              nodes: [{name: n1, tasks: [{name: w, namespace: a}, {name: w, namespace: b}]}]
              events:
                - evict: w
            expect: {status: permit}
          - name: by namespace
            decision: preemptable
            input: {evictor: {name: e}, evictees: [{name: x, node: n1}]}
            session:
              nodes: [{name: n1, tasks: [{name: w, namespace: a}, {name: w, namespace: b}]}]
              events:
                - evict: b/w
            expect: {status: permit, victims: []}
    """)
    results = run_paths([directory]).results
    assert [(r.case.name, r.outcome) for r in results] == [("ambiguous", "ERROR"), ("by namespace", "PASS")]
    assert ":8:11: evict event: 2 tasks of the session are named 'w' (a/w (uid " in results[0].message
    assert "name it by namespace/name or uid" in results[0].message

