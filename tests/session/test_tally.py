"""The decision tally's worker half (session/tally.py's storage, decide/tallying.py's
``DecisionTally`` and the verb table's tally shapes): recording never touches the store (a
blocked store never blocks a verb), each worker's memory is bounded by the cap, an
enqueue/overused/ready reason is logged once per (cycle, object, rule) over several workers, and
``why`` reads back what was recorded."""

from __future__ import annotations

import logging
import threading
from types import SimpleNamespace

import pytest

from policy_extender.decide import tallying
from policy_extender.decide.decisions import BoolDecision, FilterDecision, StatusDecision
from policy_extender.verb_names.volcano import JOB_ENQUEUEABLE, JOB_READY, PREEMPTABLE, PRIORITIZE
from policy_extender.decide.table import VERBS
from policy_extender.session.sqlite import SqliteStore

HEAD = SimpleNamespace(session_id="c1", opened_at=100.0)
TASK = SimpleNamespace(namespace="ml", name="train-7-0")
JOB = SimpleNamespace(namespace="ml", name="train-7")
REJECT = FilterDecision(False, 2, "zone (a.policy:1): zone b is drained", "zone")


#: every tally made by a test, closed after it (its flusher thread stops)
MADE: list[tallying.DecisionTally] = []


def make_tally(store, **settings) -> tallying.DecisionTally:
    """A worker's tally of the verb table's decisions."""
    tally = tallying.DecisionTally(store, VERBS.values(), **settings)
    MADE.append(tally)
    return tally


def record(tally, verb: str, head, request, decision, audits=(), request_id: str = "-") -> None:
    """One call of ``verb`` tallied as its handler does (observe.after): by its table entry."""
    entry = VERBS[verb]
    assert entry.tally is not None, f"{verb} is a deciding verb"
    entry.tally.record(tally, head, verb, request, decision, entry.outcome(decision), audits, request_id)


class BlockedStore:
    """A store whose writes hang until released, as a paused Redis does."""

    #: every store made, released after its test: the tallies' exit flush must not hang on them
    made: list[BlockedStore] = []

    def __init__(self) -> None:
        self.release = threading.Event()
        self.entered = threading.Event()
        BlockedStore.made.append(self)

    def tally_merge(self, *args):
        self.entered.set()
        self.release.wait(30)
        return []


@pytest.fixture(autouse=True)
def release_blocked_stores_and_close_tallies():
    yield
    for store in BlockedStore.made:
        store.release.set()
    BlockedStore.made.clear()
    for tally in MADE:
        tally.close()
    MADE.clear()


def test_recording_never_waits_for_the_store():
    store = BlockedStore()
    tally = make_tally(store, flush_seconds=3600)
    tally.record_predicate(HEAD, TASK, REJECT)
    flushing = threading.Thread(target=tally.flush)
    flushing.start()
    assert store.entered.wait(10)  # a flush is stuck in the store
    recording = threading.Thread(target=lambda: [tally.record_predicate(HEAD, TASK, REJECT) for _ in range(1000)])
    recording.start()
    recording.join(25)
    finished_while_blocked = not recording.is_alive() and flushing.is_alive()
    store.release.set()
    flushing.join(10)
    assert finished_while_blocked  # 1000 records while the store hangs: none of them waited on it
    assert tally.take()["c1"].counts["task\x1fml/train-7-0\x1fp"] == 1000


def test_a_workers_memory_is_bounded_by_the_cap():
    tally = make_tally(BlockedStore(), max_entries=50, flush_seconds=3600)
    for i in range(500):
        tally.record_predicate(HEAD, SimpleNamespace(namespace="ml", name=f"t{i}"), REJECT)
    agg = tally.take()["c1"]
    assert agg.size() == 50 + 1  # the predicate's call count is kept past the cap: one key per verb
    assert agg.dropped == 500 * 3 - 50  # count, rejection count, example note per call


def test_an_enqueue_reason_is_logged_once_per_cycle_object_and_rule_over_workers(tmp_path, caplog):
    path = str(tmp_path / "s.sqlite3")
    workers = [make_tally(SqliteStore(path), flush_seconds=3600) for _ in range(3)]
    reject = StatusDecision(-1, "gang", "gang (a.policy:3): gang of 5 is too big")
    caplog.set_level(logging.INFO, logger="policy_extender.why")
    for tally in workers:
        for _ in range(4):
            record(tally, JOB_ENQUEUEABLE, HEAD, SimpleNamespace(job=JOB), reject, request_id="req-1")
        record(tally, JOB_READY, HEAD, SimpleNamespace(job=JOB),
               BoolDecision(False, "ready-rule", "ready-rule (a.policy:5): 1 of 3 ready"), request_id="req-2")
        tally.flush()
    lines = [r for r in caplog.records if r.name == "policy_extender.why"]
    assert [r.getMessage() for r in lines] == [
        "cycle c1: job ml/train-7: enqueue reject: gang (a.policy:3): gang of 5 is too big",
        "cycle c1: job ml/train-7: not ready: ready-rule (a.policy:5): 1 of 3 ready"]
    assert [r.request_id for r in lines] == ["req-1", "req-2"]
    # the next cycle logs again
    record(workers[0], JOB_ENQUEUEABLE, SimpleNamespace(session_id="c2", opened_at=101.0), SimpleNamespace(job=JOB),
           reject)
    workers[0].flush()
    assert len([r for r in caplog.records if r.name == "policy_extender.why"]) == 3
    answer = workers[1].why("job", "ml/train-7", SimpleNamespace(session_id="c2"))
    assert [c["cycle"] for c in answer["cycles"]] == ["c2", "c1"]
    assert answer["cycles"][1]["enqueue"] == {"answers": {"reject": 12}, "by_rule": {"reject": {
        "gang": {"count": 12, "reason": "gang (a.policy:3): gang of 5 is too big"}}}}
    assert answer["cycles"][1]["ready"]["answers"] == {"not_ready": 3}


def test_a_job_lists_its_tasks(tmp_path):
    tally = make_tally(SqliteStore(str(tmp_path / "s.sqlite3")), flush_seconds=3600)
    tally.record_predicate(HEAD, TASK, REJECT)
    tally.record_predicate(HEAD, SimpleNamespace(namespace="ml", name="train-70-0"), REJECT)
    tally.record_predicate(HEAD, SimpleNamespace(namespace="ml", name="train-7-1"), FilterDecision(True))
    (cycle,) = tally.why("job", "ml/train-7")["cycles"]
    assert sorted(cycle["tasks"]) == ["ml/train-7-0", "ml/train-7-1"]
    assert cycle["tasks"]["ml/train-7-0"]["predicate"] == {"answers": 1, "fit": 0, "rejected_by": {
        "zone": {"count": 1, "example": "zone (a.policy:1): zone b is drained"}}}


def test_a_job_is_found_under_its_podgroups_name_with_the_job_uid(tmp_path):
    """Volcano's job controller names a job's PodGroup "<job>-<job UID>" and the scheduler's
    JobInfo carries that name (e2e/volcano/cases, enqueue, with Volcano's own code): `why
    ml/train-7` finds the enqueue decision of ml/train-7-<uid>, never one of ml/train-7-other."""
    tally = make_tally(SqliteStore(str(tmp_path / "s.sqlite3")), flush_seconds=3600)
    reject = StatusDecision(-1, "gpu-cap", "gpu-cap (q.policy:1): job asks 24 GPUs")
    podgroup = SimpleNamespace(namespace="ml", name="train-7-0bfc8f0e-d7bb-709a-8059-6461333d146f")
    record(tally, JOB_ENQUEUEABLE, HEAD, SimpleNamespace(job=podgroup), reject)
    record(tally, JOB_ENQUEUEABLE, HEAD, SimpleNamespace(job=SimpleNamespace(namespace="ml", name="train-7-other")),
           StatusDecision(1, "vip", ""))
    (cycle,) = tally.why("job", "ml/train-7")["cycles"]
    assert cycle["podgroup"] == "ml/" + podgroup.name
    assert cycle["enqueue"]["answers"] == {"reject": 1}
    (other,) = tally.why("job", "ml/train-7-other")["cycles"]
    assert "podgroup" not in other and other["enqueue"]["answers"] == {"permit": 1}
    (none,) = tally.why("job", "ml/train")["cycles"]
    assert "enqueue" not in none


def test_off_records_nothing(tmp_path):
    tally = make_tally(BlockedStore(), enabled=False)
    tally.record_predicate(HEAD, TASK, REJECT)
    assert tally.take() == {}


def test_no_session_records_nothing():
    tally = make_tally(BlockedStore())
    tally.record_predicate(None, TASK, REJECT)
    assert tally.take() == {}


def test_the_names_the_tally_keys_on_are_decoded_whatever_the_policies_read():
    """``PolicySet.reads`` is what the rules read; the decoders add ``wire.paths.ALWAYS_READ``."""
    from policy_extender.policyset import compile_sources
    from policy_extender.wire.structs import struct_for
    reads = compile_sources({"a.policy": 'filter f: node.name != "x"\n'}).reads
    for root in ("task", "job", "queue"):
        fields = struct_for(root, reads.get(root, frozenset())).__struct_fields__
        assert {"Name", "Namespace"} <= set(fields) if root != "queue" else "Name" in fields


def test_a_predicate_is_tallied_under_the_tasks_object_name():
    """record_predicate builds its key in one step; it is the key ``object_name`` gives, for real
    task views with and without a namespace, a name or a uid."""
    import json

    from policy_extender.decide.tally_shapes import object_name
    from policy_extender.session.tally import SEP, key
    from policy_extender.wire import decode
    from tests.lang.harness import NODE, TASK as WIRE_TASK, merged

    for namespace, name, uid in (("ml", "t1", "u1"), ("", "t1", "u1"), ("ml", "", "u1"), ("", "", "u1"),
                                 (None, None, "u1")):  # Volcano never sends an empty UID (a 400)
        task = merged(WIRE_TASK, {"Namespace": namespace, "Name": name, "UID": uid})
        body = json.dumps({"task": task, "node": merged(NODE, {})}).encode()
        view = decode.decode_predicate(body).task
        tally = make_tally(SqliteStore.__new__(SqliteStore), flush_seconds=3600)
        tally.record_predicate(HEAD, view, FilterDecision(True))
        counts = tally.take()["c1"].counts
        assert counts == {key("task", object_name(view), "p"): 1,
                          key("task", object_name(view), "p") + SEP + "fit": 1,
                          key("verb", "predicate", "n"): 1}, (namespace, name, uid)  # the verb's calls (decide.unserved)


@pytest.mark.parametrize("names_kept", [65536, 2])  # 2: the name cache is emptied as it goes
def test_a_batch_of_real_task_views_is_tallied_per_task(monkeypatch, names_kept):
    """The fold groups TaskViews by UID (read in C) and names each group once: several tasks in
    one batch, each decoded again per call, keep their own counts and first reasons (objects
    that are not TaskViews are grouped by their names: the other tests here)."""
    import json

    from policy_extender.decide import tallying as tally_module
    monkeypatch.setattr(tally_module, "NAMES_KEPT", names_kept)

    from policy_extender.session.tally import SEP, key
    from policy_extender.wire import decode
    from tests.lang.harness import NODE, TASK as WIRE_TASK, merged

    def view(namespace, name, uid):
        task = merged(WIRE_TASK, {"Namespace": namespace, "Name": name, "UID": uid})
        return decode.decode_predicate(json.dumps({"task": task, "node": merged(NODE, {})}).encode()).task

    for uids in (("u1", "u2", "u3"), ("u3", "u1", "u2")):
        tasks = [("ml", "a", uids[0]), ("ml", "b", uids[1]), ("web", "a", uids[2])]
        tally = make_tally(SqliteStore.__new__(SqliteStore), flush_seconds=3600)
        for i in range(30):
            namespace, name, uid = tasks[i % 3]
            fits = i % 2 == 0
            decision = FilterDecision(True) if fits else FilterDecision(False, 2, f"why {i}", "zone")
            tally.record_predicate(HEAD, view(namespace, name, uid), decision, (), f"r{i}")
        agg = tally.take()["c1"]
        for t, (namespace, name, _) in enumerate(tasks):
            p = key("task", f"{namespace}/{name}", "p")
            assert agg.counts[p] == 10 and agg.counts[p + SEP + "fit"] == 5, uids
            assert agg.counts[p + SEP + "rej" + SEP + "zone"] == 5
            first = next(i for i in range(30) if i % 3 == t and i % 2 == 1)
            assert agg.firsts[p + SEP + "rej" + SEP + "zone"] == (f"why {first}", f"r{first}")


def _predicate_calls():
    """Predicate calls of two cycles over a few tasks: fits, rejections by several rules (a
    rule-less one too), each with its own reason and request id."""
    heads = [SimpleNamespace(session_id="c1", opened_at=100.0), SimpleNamespace(session_id="c2", opened_at=200.0)]
    decisions = [FilterDecision(True), FilterDecision(False, 2, "zone b", "zone"),
                 FilterDecision(False, 3, "no gpu", "gpu"), FilterDecision(False, 2, "unnamed", None)]
    calls = []
    for i in range(400):
        task = SimpleNamespace(namespace="ml", name=f"t{i % 7}")
        decision = decisions[(i * 5 + i // 7) % len(decisions)]
        calls.append((heads[(i // 150) % 2], task, FilterDecision(decision.fits, decision.code,
                                                                  f"{decision.reason} #{i}", decision.rule), f"r{i}"))
    return calls


def _aggregates(tally):
    return {cycle: (agg.counts, agg.firsts, agg.dropped) for cycle, agg in tally.take().items()}


def test_predicates_folded_in_a_batch_make_the_same_tally_as_one_by_one(monkeypatch):
    """The flusher folds many predicate calls at once; what it adds (counts, each rule's first
    reason with its request id) is what adding each call on its own adds. Under a cap that
    drops, the entries kept may differ, but each one kept is whole and right."""
    from policy_extender.decide import tallying as tally_module

    def tally_of(fold_at: int, cap: int) -> dict:
        monkeypatch.setattr(tally_module, "FOLD_AT", fold_at)
        tally = make_tally(BlockedStore(), max_entries=cap, flush_seconds=3600)
        for head, task, decision, request_id in _predicate_calls():
            tally.record_predicate(head, task, decision, (), request_id)
        assert tally.waiting() == (0 if fold_at == 1 else 400)
        return _aggregates(tally)

    one_by_one, batched = tally_of(1, 10_000), tally_of(10_000, 10_000)  # 1: each call folded alone
    assert batched == one_by_one
    first = {}  # each rejection's example: the reason and request id of its first call
    for head, task, decision, request_id in _predicate_calls():
        if not decision.fits:
            k = f"task\x1fml/{task.name}\x1fp\x1frej\x1f{decision.rule or ''}"
            first.setdefault((head.session_id, k), (decision.reason, request_id))
    assert {(c, k): v for c, (_, firsts, _) in batched.items() for k, v in firsts.items()} == first
    for fold_at in (1, 10_000):
        capped = tally_of(fold_at, 12)
        for cycle, (counts, firsts, dropped) in capped.items():
            assert len(counts) + len(firsts) == 12 and dropped > 0
            assert all(n == one_by_one[cycle][0][k] for k, n in counts.items())
            assert all(note == one_by_one[cycle][1][k] for k, note in firsts.items())


def test_no_predicate_call_is_lost_when_a_flush_folds_while_threads_record():
    tally = make_tally(BlockedStore(), flush_seconds=3600)
    per_thread, started = 5000, threading.Barrier(5)

    def record() -> None:
        started.wait()
        for _ in range(per_thread):
            tally.record_predicate(HEAD, TASK, REJECT)

    threads = [threading.Thread(target=record) for _ in range(4)]
    for t in threads:
        t.start()
    started.wait()
    def answers_taken() -> int:
        taken = tally.take().get("c1")
        return taken.counts.get("task\x1fml/train-7-0\x1fp", 0) if taken is not None else 0

    total = folds = 0
    while any(t.is_alive() for t in threads):
        total += answers_taken()
        folds += 1
    total += answers_taken()
    assert folds > 1 and total == 4 * per_thread


def test_unfolded_predicate_calls_stay_bounded_without_a_flusher(monkeypatch):
    from policy_extender.decide import tallying as tally_module

    monkeypatch.setattr(tally_module, "FOLD_AT", 64)
    tally = make_tally(BlockedStore(), flush_seconds=3600)
    longest = 0
    for _ in range(1000):
        tally.record_predicate(HEAD, TASK, REJECT)
        longest = max(longest, tally.waiting())
    assert longest < 64
    assert tally.take()["c1"].counts["task\x1fml/train-7-0\x1fp"] == 1000


def test_predicate_calls_waiting_for_a_fold_add_nothing_the_garbage_collector_counts():
    """The predicate path leaves no tracked object behind, so under load no collection runs
    (BENCHMARKS.md, the latency tail): the calls kept until a fold are values in flat lists:
    the shared head, a cached name, the (gc=False) decision and the request id."""
    import gc
    import json

    from policy_extender.wire import decode
    from tests.lang.harness import NODE, TASK as WIRE_TASK, merged

    views = [decode.decode_predicate(json.dumps({"task": merged(WIRE_TASK, {"Name": f"t{i}", "UID": f"u{i}"}),
                                                 "node": merged(NODE, {})}).encode()).task for i in range(4)]
    decisions = [FilterDecision(True), REJECT]
    tally = make_tally(BlockedStore(), flush_seconds=3600)
    tally.record_predicate(HEAD, views[0], REJECT)  # its flusher started, outside the count
    for view in views:
        tally.record_predicate(HEAD, view, REJECT, (), "r")  # names cached
    gc.disable()
    try:
        before = gc.get_count()[0]
        for i in range(4000):
            tally.record_predicate(HEAD, views[i % 4], decisions[i % 2], (), "r")
        grown = gc.get_count()[0] - before
    finally:
        gc.enable()
    assert tally.waiting() == 4005
    assert grown < 10, grown


def test_folding_many_predicate_calls_runs_no_collection():
    """Counter(zip(...)) keeps a tuple per distinct answer only, so folding 5,000 calls (a few
    tasks and rules) makes far fewer tracked objects than the collector's threshold."""
    import gc

    tally = make_tally(BlockedStore(), flush_seconds=3600)
    rules = [FilterDecision(True)] + [FilterDecision(False, 2, f"reason {r}", f"rule{r}") for r in range(4)]
    tasks = [SimpleNamespace(namespace="ml", name=f"t{t}") for t in range(6)]
    for i in range(5000):
        tally.record_predicate(HEAD, tasks[i % 6], rules[i % 5], (), f"r{i}")
    started = []
    gc.collect()
    gc.callbacks.append(collected := lambda phase, info: started.append(phase) if phase == "start" else None)
    try:
        counts = tally.take()["c1"].counts
    finally:
        gc.callbacks.remove(collected)
    assert sum(n for k, n in counts.items() if k.endswith("\x1fp")) == 5000
    assert started == []


def test_a_refused_evictee_of_an_abstain_answer_is_not_called_protected(tmp_path):
    """e2e/volcano/cases, victim-preempt-if-none-abstain: the service abstained (`if none
    abstain`), priority and conformance evicted the pod, and /why said it was protected."""
    from policy_extender.decide.decisions import VictimDecision

    tally = make_tally(SqliteStore(str(tmp_path / "s.sqlite3")), flush_seconds=3600)
    evictor = SimpleNamespace(namespace="ml", name="urgent-0")
    web, batch = SimpleNamespace(namespace="ml", name="web-0"), SimpleNamespace(namespace="ml", name="batch-0")
    record(tally, PREEMPTABLE, HEAD, SimpleNamespace(evictor=evictor, evictees=[web]),
           VictimDecision(0, [], {0: "prefer-batch: not batch"}))
    record(tally, PREEMPTABLE, HEAD, SimpleNamespace(evictor=evictor, evictees=[batch]),
           VictimDecision(1, [], {0: "protected: protected"}))
    (cycle,) = tally.why("task", "ml/web-0")["cycles"]
    assert cycle["victims"]["preemptable"] == {"as_evictee_abstain": 1, "abstain_example": "prefer-batch: not batch"}
    (cycle,) = tally.why("task", "ml/batch-0")["cycles"]
    assert cycle["victims"]["preemptable"] == {"as_evictee_protect": 1, "protected_example": "protected: protected"}


def test_a_prioritize_of_no_nodes_keeps_the_latest_scores_shown(tmp_path):
    """Volcano v1.14+'s preempt calls prioritize once more with no nodes
    (e2e/volcano/cases, victim-reclaim-all-protected): /why kept showing no best node."""
    from policy_extender.decide.decisions import ScoreDecision

    tally = make_tally(SqliteStore(str(tmp_path / "s.sqlite3")), flush_seconds=3600)
    record(tally, PRIORITIZE, HEAD, SimpleNamespace(task=TASK), ScoreDecision({"n1": 20.0, "n2": 10.0}, {}))
    record(tally, PRIORITIZE, HEAD, SimpleNamespace(task=TASK), ScoreDecision({}, {}))
    (cycle,) = tally.why("task", "ml/train-7-0")["cycles"]
    assert cycle["prioritize"]["calls"] == 2
    assert [n["node"] for n in cycle["prioritize"]["top_nodes"]] == ["n1", "n2"]


def test_close_stops_the_flusher_and_writes_what_is_pending(tmp_path):
    store = SqliteStore(str(tmp_path / "s.sqlite3"))
    tally = make_tally(store, flush_seconds=3600)
    before = set(threading.enumerate())
    tally.record_predicate(HEAD, TASK, REJECT)
    flushers = [t for t in threading.enumerate() if t.name == "policy-extender-tally" and t not in before]
    assert tally.read_cycle("c1", "task" + tallying.SEP) == ({}, {})  # waiting for the hourly flush
    tally.close(timeout=5)
    assert flushers and not any(t.is_alive() for t in flushers)
    counts, _ = tally.read_cycle("c1", "task" + tallying.SEP)
    assert counts, "close wrote the pending call"
