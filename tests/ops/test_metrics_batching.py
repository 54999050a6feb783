"""Batched metrics (``metrics.note_request`` + ``flush``) give exactly what immediate
``observe_request`` / ``count_decision`` give, bucket boundaries included, in one process and
summed across worker processes whose flusher threads write while they keep running."""

from __future__ import annotations

import io
import os

import pytest
from prometheus_client import generate_latest

from policy_extender import metrics
from tests.ops.test_metrics import SPAWN, scrape

#: every bucket boundary, values either side of it, zero and beyond the last bucket
LATENCIES = [0.0, *metrics.LATENCY_BUCKETS, *(b * 1.0001 for b in metrics.LATENCY_BUCKETS), 7.5] * 3
SIZES = [0, 1, *metrics.BODY_BUCKETS, *(b + 1 for b in metrics.BODY_BUCKETS), 5e9,
         # integer sizes (what a server passes) take note_request's integer arithmetic, not bisect
         *(int(b) + d for b in metrics.BODY_BUCKETS for d in (-1, 0, 1)), 5 << 30, 1 << 40]

#: (verb, rule, outcome) of the calls: several rules and outcomes per verb, and a neutral answer
DECISIONS = [("predicate", "gpu_fit", "reject"), ("predicate", "", "fits"), ("predicate", "zone", "reject"),
             ("prioritize", "", "scored"), ("jobEnqueueable", "quota", "reject"), ("jobEnqueued", "", "")]


def fresh_metrics() -> metrics.Metrics:
    from prometheus_client import values
    assert not getattr(values.ValueClass, "_multiprocess", False)
    return metrics.build()


def test_batched_tallies_render_exactly_as_observed_one_by_one(monkeypatch):
    metrics.flush()  # calls an earlier test left pending go to its registry (they failed this test after tests/web)
    immediate, batched = fresh_metrics(), fresh_metrics()
    monkeypatch.setattr(metrics, "_metrics", immediate)
    for i, (seconds, size) in enumerate(zip(LATENCIES * 3, SIZES * 3)):
        verb, rule, outcome = DECISIONS[i % len(DECISIONS)]
        metrics.observe_request(verb, 200, seconds, size)
        if outcome:
            metrics.count_decision(verb, rule, outcome)
    metrics.observe_request("prioritize", 500, 0.2, 10)
    monkeypatch.setattr(metrics, "_metrics", batched)
    for i, (seconds, size) in enumerate(zip(LATENCIES * 3, SIZES * 3)):
        verb, rule, outcome = DECISIONS[i % len(DECISIONS)]
        metrics.note_request(verb, 200, seconds, size, rule, outcome)
    metrics.note_request("prioritize", 500, 0.2, 10)
    metrics.flush()
    assert _without_created(generate_latest(batched.registry)) == _without_created(generate_latest(immediate.registry))


def _without_created(text: bytes) -> list[str]:
    """The exposition's lines, sorted: batching creates the labelled children in another order."""
    return sorted(line for line in text.decode().splitlines() if "_created" not in line)


def test_flush_without_pending_calls_writes_nothing(monkeypatch):
    monkeypatch.setattr(metrics, "_metrics", fresh_metrics())
    metrics.flush()
    assert metrics.metrics().children == {}


def batching_worker(directory: str, requests: int, conn) -> None:
    os.environ[metrics.MULTIPROC_ENV] = directory
    for _ in range(requests):
        metrics.note_request("predicate", 200, 0.003, 2048, "zone", "reject")
    conn.send(os.getpid())
    conn.recv()  # alive, never flushing by hand: only its flusher thread writes


@pytest.mark.slow
def test_scrape_sees_the_pending_calls_of_running_workers(tmp_path, monkeypatch):
    monkeypatch.setenv(metrics.MULTIPROC_ENV, str(tmp_path / "prom"))  # restored after the test
    directory = metrics.prepare_directory()
    running = []
    try:
        for requests in (3, 5):
            parent, child = SPAWN.Pipe()
            process = SPAWN.Process(target=batching_worker, args=(directory, requests, child))
            process.start()
            assert parent.poll(30)
            parent.recv()
            running.append((process, parent))
        samples = scrape(directory)
    finally:
        for process, parent in running:
            parent.send("exit")
            process.join(30)
    predicate = (("protocol", "volcano"), ("verb", "predicate"))
    assert samples[("policy_extender_requests_total", (("code", "200"), *predicate))] == 8
    assert samples[("policy_extender_request_duration_seconds_sum", predicate)] == pytest.approx(0.024)
    assert samples[("policy_extender_decisions_total", (("outcome", "reject"), ("protocol", "volcano"), ("rule", "zone"), ("verb", "predicate")))] == 8


def _requests_counted(registry) -> float:
    return sum(s.value for m in registry.collect() if m.name == metrics.PREFIX + "requests"
               for s in m.samples if s.name.endswith("_total"))


def test_no_call_is_lost_when_a_flush_takes_the_calls_while_threads_add_more(monkeypatch):
    """note_request appends without a lock; take() slices and deletes what it saw. Four threads
    note calls while this thread flushes as fast as it can: every call is counted exactly once."""
    import threading

    fresh = fresh_metrics()
    monkeypatch.setattr(metrics, "_metrics", fresh)
    metrics.flush()
    per_thread, started = 20000, threading.Barrier(5)

    def note() -> None:
        started.wait()
        for _ in range(per_thread):
            metrics.note_request("predicate", 200, 0.001, 100, "zone", "reject")

    threads = [threading.Thread(target=note) for _ in range(4)]
    for t in threads:
        t.start()
    started.wait()
    flushes = 0
    while any(t.is_alive() for t in threads):
        metrics.flush()
        flushes += 1
    metrics.flush()
    assert flushes > 1
    assert _requests_counted(fresh.registry) == 4 * per_thread


def test_unflushed_calls_stay_bounded_without_a_flusher(monkeypatch):
    """A flusher that cannot keep up (or is gone) must not let the calls list grow without bound:
    past CALLS_AT_MOST the calling thread flushes them, and none is lost."""
    fresh = fresh_metrics()
    monkeypatch.setattr(metrics, "_metrics", fresh)
    metrics.flush()
    monkeypatch.setattr(metrics, "CALLS_AT_MOST", 50 * metrics.FIELDS)
    monkeypatch.setattr(metrics._pending, "flusher_pid", metrics.process.pid)  # no flusher thread runs
    longest = 0
    for _ in range(1000):
        metrics.note_request("predicate", 200, 0.001, 100)
        longest = max(longest, metrics._pending.waiting())
    assert longest < 50
    assert _requests_counted(fresh.registry) + metrics._pending.waiting() == 1000


def test_the_dispatch_bounds_unflushed_calls_as_note_request_does(monkeypatch, tmp_path):
    """Served calls (the dispatch counts each through note_request) with no flusher running
    stay under its bound too, and every call is counted."""
    from policy_extender.config import Config
    from policy_extender.web import create_app
    from tests.support.bodies import sample
    from tests.support.policies import write_policies

    fresh = fresh_metrics()
    monkeypatch.setattr(metrics, "_metrics", fresh)
    metrics.flush()
    monkeypatch.setattr(metrics, "CALLS_AT_MOST", 10 * metrics.FIELDS)
    monkeypatch.setattr(metrics._pending, "flusher_pid", metrics.process.pid)  # no flusher thread runs
    policies = write_policies(tmp_path / "policies", {"any.policy": 'filter big: node.name != "nope"\n'})
    app = create_app(Config(policy_dirs=(str(policies),), session_store=f"sqlite:{tmp_path}/s.sqlite3",
                            reload_interval=0.0))
    service = app.extensions["policy_extender"]
    longest = 0
    try:
        for _ in range(100):
            answer = app.wsgi_app({"REQUEST_METHOD": "POST", "PATH_INFO": "/predicate",
                                   "CONTENT_TYPE": "application/json", "CONTENT_LENGTH": str(len(sample("predicate"))),
                                   "wsgi.input": io.BytesIO(sample("predicate"))},
                                  lambda status, headers: None)
            assert b"".join(answer) == b'{"status":"","code":0}'
            longest = max(longest, metrics._pending.waiting())
    finally:
        service.stop()
    assert longest < 10
    assert _requests_counted(fresh.registry) + metrics._pending.waiting() == 100


def test_a_calls_values_count_its_decision_only_for_an_answer(monkeypatch):
    """The dispatch hands every call's values over as they are: an answer's decision is counted,
    a refusal's or failure's is not (as note_request without an outcome)."""
    from policy_extender.service import RequestRecord

    metrics.flush()  # calls an earlier test left pending would be flushed into by_record below
    by_record, by_note = fresh_metrics(), fresh_metrics()
    records = [RequestRecord("predicate", 200, "reject", "zone", 0.002, 137_000),
               RequestRecord("predicate", 200, "", "", 0.0004, 136_000),
               RequestRecord("jobEnqueueable", 200, "permit", "quota", 0.001, 3_000),
               RequestRecord("predicate", 500, "error", "", 0.003, 1_000, "predicate failed: ..."),
               RequestRecord("predicate", 500, "no_session", "", 0.001, 1_000)]
    monkeypatch.setattr(metrics, "_metrics", by_record)
    for r in records:
        metrics.note_request(r.verb, r.status, r.seconds, r.body_bytes, r.rule, r.decision)
    metrics.flush()
    monkeypatch.setattr(metrics, "_metrics", by_note)
    for r in records:
        if r.status == 200:
            metrics.note_request(r.verb, 200, r.seconds, r.body_bytes, r.rule, r.decision)
        else:
            metrics.note_request(r.verb, r.status, r.seconds, r.body_bytes)
    metrics.flush()
    assert _without_created(generate_latest(by_record.registry)) == _without_created(generate_latest(by_note.registry))
    assert 'outcome="error"' not in generate_latest(by_record.registry).decode()


def test_calls_waiting_for_the_flusher_add_nothing_the_garbage_collector_counts(monkeypatch):
    """A predicate path that leaves no tracked object behind runs no collection under load (see
    BENCHMARKS.md, the latency tail); the calls kept until a flush are strings and numbers in
    one flat list."""
    import gc

    monkeypatch.setattr(metrics, "_metrics", fresh_metrics())
    monkeypatch.setattr(metrics._pending, "flusher_pid", metrics.process.pid)  # no flusher thread
    metrics.flush()
    seconds = [0.001 * i for i in range(2000)]
    gc.disable()
    try:
        before = gc.get_count()[0]
        for i in range(2000):
            metrics.note_request("predicate", 200, seconds[i], 137_000, "zone", "reject")
            metrics.note_request("predicate", 500, 0.001, 137_000, "", "error")
        grown = gc.get_count()[0] - before
    finally:
        gc.enable()
    assert grown < 10, grown
    metrics.flush()  # (a flusher thread of an earlier test may have taken some already)
    assert _requests_counted(metrics.metrics().registry) == 4000


def test_folding_many_calls_runs_no_collection():
    """The fold makes a column per field (a slice), not a tuple per call: 5,000 calls folded at
    once never reach the collector's threshold (700 tracked objects), so a flush does not start one."""
    import gc

    verbs = ("predicate", "prioritize", "jobEnqueueable")
    calls = [value for i in range(5000)
             for value in (verbs[i % 3], 200 if i % 7 else 500, 0.0001 * i, 1000 + i, f"rule{i % 5}",
                           "reject" if i % 2 else "")]
    started = []
    gc.collect()
    gc.callbacks.append(collected := lambda phase, info: started.append(phase) if phase == "start" else None)
    try:
        requests, decisions = metrics.fold(calls)
    finally:
        gc.callbacks.remove(collected)
    assert sum(tally[0] for tally in requests.values()) == 5000 and decisions
    assert started == []


def test_a_served_call_counts_its_values_and_builds_a_record_only_for_a_callback(monkeypatch, tmp_path):
    """The dispatch passes each verb call's values to note_request: an answer's decision is
    counted, a refusal's is not; the RequestRecord the request-finished callbacks get carries
    the same values and a non-200 answer's error."""
    from policy_extender.config import Config
    from policy_extender.web import create_app
    from tests.support.bodies import sample
    from tests.support.policies import write_policies

    fresh = fresh_metrics()
    monkeypatch.setattr(metrics, "_metrics", fresh)
    metrics.flush()  # what earlier tests left pending goes to their registry, not this one
    policies = write_policies(tmp_path / "policies", {"deny.policy": 'filter deny: node.name == "nope"\n'})
    app = create_app(Config(policy_dirs=(str(policies),), session_store=f"sqlite:{tmp_path}/s.sqlite3",
                            reload_interval=0.0))
    service = app.extensions["policy_extender"]
    records = []
    service.on_request_finished(records.append)
    client = app.test_client()
    try:
        rejected = client.post("/predicate", data=sample("predicate"), content_type="application/json")
        refused = client.post("/predicate", data=b'{"task":', content_type="application/json")
    finally:
        service.stop()
    assert (rejected.status_code, refused.status_code) == (200, 400)
    metrics.flush()
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for m in fresh.registry.collect() for s in m.samples}
    requests = {dict(k[1])["code"]: v for k, v in samples.items()
                if k[0] == metrics.PREFIX + "requests_total" and dict(k[1]).get("verb") == "predicate"}
    assert requests == {"200": 1.0, "400": 1.0}, requests
    decisions = {tuple(sorted(dict(k[1]).items())): v for k, v in samples.items()
                 if k[0] == metrics.PREFIX + "decisions_total"}
    assert decisions == {(("outcome", "reject"), ("protocol", "volcano"), ("rule", "deny"), ("verb", "predicate")): 1.0}, decisions
    assert [(r.verb, r.status, r.decision, r.rule, r.body_bytes) for r in records] == [
        ("predicate", 200, "reject", "deny", len(sample("predicate"))), ("predicate", 400, "error", "", 8)]
    assert "malformed JSON" in records[1].error and records[0].error == ""
    assert all(r.seconds > 0 for r in records)
