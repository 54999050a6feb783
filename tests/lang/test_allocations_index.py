"""The index of ``session.allocations`` changes speed, never results: an aggregate whose condition
names ``a.node``/``a.job``/``a.queue == x`` reads one bucket, and gives exactly what the plain loop
over the whole list gives (values, and errors: bounds, the work budget). Each case is evaluated
by the compiled policy and by the same policy compiled with the index switched off."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from policy_extender.lang import compiler, runtime

from .harness import decide

#: (condition over `a`, whether the compiler indexes it)
CONDITIONS = [
    ("a.node == node.name", True),
    ("a.job == task.job_id and a.node == node.name", True),
    ("a.requests.gpu > 0 and a.node == node.name", True),
    ("node.name == a.node and a.requests.gpu >= 1", True),
    ("a.queue == 'research'", True),
    ("a.node == 'node-a' and a.job == 'job-2'", True),
    ("a.node == (task.node_name ?? 'node-b')", True),
    ("a.node == task.labels.zone", True),
    ("a.node == zone", True),                                  # a let that is a path
    ("not (a.requests.gpu > 2) and a.queue == 'batch'", True),
    ("a.job == task.job_id and a.requests.cpu * 2 > 3", True),
    ("a.node == node.name and count(b for b in session.allocations if b.job == a.job) > 1", True),
    ("a.node == node.name or a.job == 'job-1'", False),        # not a conjunction
    ("a.queue == null", False),                                 # null is not a string key
    ("a.requests.cpu * 2 > 3 and a.node == node.name", False),  # arithmetic before it may fail
    ("a.requests.gpu * 4e18 > 0 and a.node == node.name", False),  # ... and here it does (E510)
    ("a.job == a.node", False),                                 # the key reads the loop variable
    ("a.node != node.name", False),
    ("len(a.node) > 0 and a.node == node.name", False),         # a call before it spends work
]
ELEMENTS = ["count(a for a in {list} if {cond})", "sum(a.requests.gpu for a in {list} if {cond})",
            "any(a.requests.cpu > 2 for a in {list} if {cond})", "all(a.requests.gpu < 3 for a in {list} if {cond})",
            "min(a.requests.cpu for a in {list} if {cond})", "max(a.requests.gpu * 4e18 for a in {list} if {cond})"]
LISTS = ["session.allocations", "session.evictions"]
NAMES = ["node-a", "node-b", ""]


def evaluate(expr: str, session: dict, task: dict, node: dict, indexed: bool, monkeypatch) -> tuple[str, int]:
    """(the value as text or the evaluation error, how many aggregates read a bucket)."""
    buckets = []
    real = compiler._bucket

    def counting(*args):
        buckets.append(args[2])
        return real(*args)

    with monkeypatch.context() as patch:
        patch.setattr(compiler, "_bucket", counting)
        if not indexed:
            patch.setattr(compiler.Compiler, "indexed", lambda self, node, slot: None)
        policy = f"let zone = task.labels.zone\nlet shown = {expr}\nfilter show: false\n    reason \"{{shown}}\"\n"
        try:
            got = decide({"policies": {"case.policy": policy}, "session": session,
                          "input": {"task": task, "node": node}})
        except Exception as error:  # an EvalError: the service answers 500 with its text
            return f"{type(error).__name__}: {error}", len(buckets)
    assert "error" not in got, got
    return got["reason"].split(": ", 1)[1], len(buckets)


allocation = st.fixed_dictionaries({
    "job": st.sampled_from(["job-1", "job-2", ""]), "queue": st.sampled_from(["research", "batch", ""]),
    "node": st.sampled_from(NAMES), "resources": st.fixed_dictionaries({
        "cpu": st.integers(0, 4), "nvidia.com/gpu": st.integers(0, 3)})})


def _session(allocations, evictions):
    def named(items, prefix):
        return [{"task": f"{prefix}{i}", **a} for i, a in enumerate(items)]
    return {"allocations": named(allocations, "t"), "evictions": named(evictions, "v")}


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(allocations=st.lists(allocation, max_size=12), evictions=st.lists(allocation, max_size=4),
       condition=st.sampled_from(CONDITIONS), element=st.sampled_from(ELEMENTS), listed=st.sampled_from(LISTS),
       job=st.sampled_from(["job-1", "job-2", ""]), node=st.sampled_from(NAMES[:2]),
       zone=st.sampled_from([None, "node-a", "node-b"]), budget=st.integers(1, 80) | st.just(runtime.MAX_WORK))
@pytest.mark.slow
def test_indexed_aggregates_equal_the_plain_loop(monkeypatch, allocations, evictions, condition, element,
                                                 listed, job, node, zone, budget):
    monkeypatch.setattr(runtime, "MAX_WORK", budget)  # a small budget: the E512 errors agree too
    expr = element.format(list=listed, cond=condition[0])
    session = _session(allocations, evictions)
    task = {"Job": job, "Pod": {"metadata": {"labels": {} if zone is None else {"zone": zone}}}}
    plain, _ = evaluate(expr, session, task, {"Name": node}, False, monkeypatch)
    indexed, _ = evaluate(expr, session, task, {"Name": node}, True, monkeypatch)
    assert indexed == plain


FIXED = _session([{"job": j, "queue": q, "node": n, "resources": {"cpu": c, "nvidia.com/gpu": g}}
                  for j, q, n, c, g in [("job-1", "research", "node-a", 1, 1), ("job-2", "batch", "node-a", 4, 0),
                                        ("job-1", "research", "node-b", 2, 2), ("job-2", "research", "node-a", 3, 3),
                                        ("", "", "", 1, 0)]],
                 [{"job": "job-1", "queue": "research", "node": "node-a", "resources": {"nvidia.com/gpu": 2}}])


@pytest.mark.parametrize("listed", LISTS)
@pytest.mark.parametrize("element", ELEMENTS, ids=lambda e: e.split("(")[0])
@pytest.mark.parametrize("condition,uses_index", CONDITIONS, ids=[c for c, _ in CONDITIONS])
def test_the_index_is_used_exactly_where_it_is_safe(monkeypatch, condition, uses_index, element, listed):
    expr = element.format(list=listed, cond=condition)
    task = {"Job": "job-1", "Pod": {"metadata": {"labels": {"zone": "node-a"}}}}
    plain, none = evaluate(expr, FIXED, task, {"Name": "node-a"}, False, monkeypatch)
    indexed, read = evaluate(expr, FIXED, task, {"Name": "node-a"}, True, monkeypatch)
    assert indexed == plain and none == 0
    assert (read > 0) == uses_index


def test_an_indexed_aggregate_meets_the_bound_of_the_whole_list(monkeypatch):
    """E512 for an aggregate over too many elements, though the bucket is small."""
    monkeypatch.setattr(runtime, "MAX_ITERATIONS", 3)
    expr = "count(a for a in session.allocations if a.node == 'node-b')"
    plain, _ = evaluate(expr, FIXED, {}, {}, False, monkeypatch)
    indexed, read = evaluate(expr, FIXED, {}, {}, True, monkeypatch)
    assert read == 1 and indexed == plain
    assert indexed.startswith("EvalError: ") and "aggregate over 5 elements (limit 3)" in indexed
