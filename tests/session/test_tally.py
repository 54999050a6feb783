"""The decision tally's worker half (session/tally.py): recording never touches the store (a
blocked store never blocks a verb), each worker's memory is bounded by the cap, an
enqueue/overused/ready reason is logged once per (cycle, object, rule) over several workers, and
``why`` reads back what was recorded."""

from __future__ import annotations

import logging
import threading
from types import SimpleNamespace

from policy_extender.decide.decisions import BoolDecision, FilterDecision, StatusDecision
from policy_extender.session.sqlite import SqliteStore
from policy_extender.session.tally import Tally

HEAD = SimpleNamespace(session_id="c1", opened_at=100.0)
TASK = SimpleNamespace(namespace="ml", name="train-7-0")
JOB = SimpleNamespace(namespace="ml", name="train-7")
REJECT = FilterDecision(False, 2, "zone (a.policy:1): zone b is drained", "zone")


class BlockedStore:
    """A store whose writes hang until released, as a paused Redis does."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.entered = threading.Event()

    def tally_merge(self, *args):
        self.entered.set()
        self.release.wait(30)
        return []


def test_recording_never_waits_for_the_store():
    store = BlockedStore()
    tally = Tally(store, flush_seconds=3600)
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
    tally = Tally(BlockedStore(), max_entries=50, flush_seconds=3600)
    for i in range(500):
        tally.record_predicate(HEAD, SimpleNamespace(namespace="ml", name=f"t{i}"), REJECT)
    agg = tally.take()["c1"]
    assert agg.size() == 50
    assert agg.dropped == 500 * 3 - 50  # count, rejection count, example note per call


def test_an_enqueue_reason_is_logged_once_per_cycle_object_and_rule_over_workers(tmp_path, caplog):
    path = str(tmp_path / "s.sqlite3")
    workers = [Tally(SqliteStore(path), flush_seconds=3600) for _ in range(3)]
    reject = StatusDecision(-1, "gang", "gang (a.policy:3): gang of 5 is too big")
    caplog.set_level(logging.INFO, logger="policy_extender.why")
    for tally in workers:
        for _ in range(4):
            tally.record_enqueue(HEAD, JOB, reject, "reject", request_id="req-1")
        tally.record_ready(HEAD, JOB, BoolDecision(False, "ready-rule", "ready-rule (a.policy:5): 1 of 3 ready"),
                           request_id="req-2")
        tally.flush()
    lines = [r for r in caplog.records if r.name == "policy_extender.why"]
    assert [r.getMessage() for r in lines] == [
        "cycle c1: job ml/train-7: enqueue reject: gang (a.policy:3): gang of 5 is too big",
        "cycle c1: job ml/train-7: not ready: ready-rule (a.policy:5): 1 of 3 ready"]
    assert [r.request_id for r in lines] == ["req-1", "req-2"]
    # the next cycle logs again
    workers[0].record_enqueue(SimpleNamespace(session_id="c2", opened_at=101.0), JOB, reject, "reject")
    workers[0].flush()
    assert len([r for r in caplog.records if r.name == "policy_extender.why"]) == 3
    answer = workers[1].why("job", "ml/train-7", SimpleNamespace(session_id="c2"))
    assert [c["cycle"] for c in answer["cycles"]] == ["c2", "c1"]
    assert answer["cycles"][1]["enqueue"] == {"answers": {"reject": 12}, "by_rule": {"reject": {
        "gang": {"count": 12, "reason": "gang (a.policy:3): gang of 5 is too big"}}}}
    assert answer["cycles"][1]["ready"]["answers"] == {"not_ready": 3}


def test_a_job_lists_its_tasks(tmp_path):
    tally = Tally(SqliteStore(str(tmp_path / "s.sqlite3")), flush_seconds=3600)
    tally.record_predicate(HEAD, TASK, REJECT)
    tally.record_predicate(HEAD, SimpleNamespace(namespace="ml", name="train-70-0"), REJECT)
    tally.record_predicate(HEAD, SimpleNamespace(namespace="ml", name="train-7-1"), FilterDecision(True))
    (cycle,) = tally.why("job", "ml/train-7")["cycles"]
    assert sorted(cycle["tasks"]) == ["ml/train-7-0", "ml/train-7-1"]
    assert cycle["tasks"]["ml/train-7-0"]["predicate"] == {"answers": 1, "fit": 0, "rejected_by": {
        "zone": {"count": 1, "example": "zone (a.policy:1): zone b is drained"}}}


def test_off_records_nothing(tmp_path):
    tally = Tally(BlockedStore(), enabled=False)
    tally.record_predicate(HEAD, TASK, REJECT)
    assert tally.take() == {}


def test_no_session_records_nothing():
    tally = Tally(BlockedStore())
    tally.record_predicate(None, TASK, REJECT)
    assert tally.take() == {}


def test_every_deciding_verb_of_the_table_is_audited_and_tallied():
    from policy_extender.decide.observe import AFTER
    from policy_extender.decide.table import DECIDING
    assert set(AFTER) == set(DECIDING)


def test_the_names_the_tally_keys_on_are_decoded_whatever_the_policies_read():
    from policy_extender.policyset import compile_sources
    reads = compile_sources({"a.policy": 'filter f: node.name != "x"\n'}).reads
    assert {("Name",), ("Namespace",)} <= reads["task"] and {("Name",), ("Namespace",)} <= reads["job"]
    assert ("Name",) in reads["queue"]


def test_a_predicate_is_tallied_under_the_tasks_object_name():
    """record_predicate builds its key in one step; it is the key ``object_name`` gives, for real
    task views with and without a namespace, a name or a uid."""
    import json

    from policy_extender.session.tally import SEP, key, object_name
    from policy_extender.wire import decode
    from tests.lang.harness import NODE, TASK as WIRE_TASK, merged

    for namespace, name, uid in (("ml", "t1", "u1"), ("", "t1", "u1"), ("ml", "", "u1"), ("", "", "u1"),
                                 (None, None, "u1")):  # Volcano never sends an empty UID (a 400)
        task = merged(WIRE_TASK, {"Namespace": namespace, "Name": name, "UID": uid})
        body = json.dumps({"task": task, "node": merged(NODE, {})}).encode()
        view = decode.decode_predicate(body).task
        tally = Tally(SqliteStore.__new__(SqliteStore), flush_seconds=3600)
        tally.record_predicate(HEAD, view, FilterDecision(True))
        counts = tally.take()["c1"].counts
        assert counts == {key("task", object_name(view), "p"): 1,
                          key("task", object_name(view), "p") + SEP + "fit": 1}, (namespace, name, uid)
