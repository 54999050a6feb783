"""The decision tally's store half (session/tally.py) on SQLite and a real redis-server: counts
merge additively across writers, first notes keep the first writer, the kept cycles are the most
recently opened ones, the cap of entries per cycle holds, and a late flush for a dropped cycle
stores nothing."""

from __future__ import annotations

import threading

from policy_extender.decide.table import VERBS
from policy_extender.decide.tallying import DecisionTally
from policy_extender.session.tally import SEP, key


def test_counts_from_two_writers_add_up_and_first_notes_keep_the_first(make_store):
    a, b = make_store(), make_store()
    k = key("task", "ml/t0", "p")
    rej = key("task", "ml/t0", "p" + SEP + "rej" + SEP + "zone")
    assert a.tally_merge("c1", 10.0, {k: 3, rej: 2}, {rej: "first reason"}, {}, 0, 4, 1000) == [rej]
    assert b.tally_merge("c1", 10.0, {k: 4, rej: 1}, {rej: "second reason"}, {}, 0, 4, 1000) == []
    counts, notes = a.tally_read("c1", "task" + SEP + "ml/t0" + SEP)
    assert counts == {k: 7, rej: 3}
    assert notes == {rej: "first reason"}
    # another object's entries are not read
    assert b.tally_read("c1", "task" + SEP + "ml/t" + SEP) == ({}, {})


def test_latest_notes_are_replaced(make_store):
    store = make_store()
    top = key("task", "ns/a", "s" + SEP + "top")
    store.tally_merge("c1", 1.0, {}, {}, {top: "old"}, 0, 4, 100)
    store.tally_merge("c1", 1.0, {}, {}, {top: "new"}, 0, 4, 100)
    assert store.tally_read("c1", "task" + SEP + "ns/a" + SEP)[1] == {top: "new"}


def test_the_kept_cycles_are_the_most_recently_opened_and_a_late_flush_is_dropped(make_store):
    store = make_store()
    k = key("queue", "q1", "o" + SEP + "not_overused")
    for i in range(5):
        assert store.tally_merge(f"c{i}", float(i), {k: i + 1}, {}, {}, 0, 4, 100) is not None
    assert [c for c, _, _ in store.tally_cycles()] == ["c4", "c3", "c2", "c1"]
    assert store.tally_read("c0", "queue" + SEP)[0] == {}
    # a worker flushing for the pruned cycle late: nothing is stored, the kept cycles stay
    assert store.tally_merge("c0", 0.0, {k: 9}, {}, {}, 0, 4, 100) is None
    assert [c for c, _, _ in store.tally_cycles()] == ["c4", "c3", "c2", "c1"]
    assert store.tally_read("c1", "queue" + SEP)[0] == {k: 2}


def test_the_cap_of_entries_per_cycle_holds_and_counts_what_it_dropped(make_store):
    store = make_store()
    first = {key("task", f"ns/t{i}", "p"): 1 for i in range(8)}
    store.tally_merge("c1", 1.0, first, {}, {}, 0, 4, 10)
    more = {key("task", f"ns/u{i}", "p"): 1 for i in range(5)}
    more[key("task", "ns/t0", "p")] = 5  # an existing entry is still counted
    store.tally_merge("c1", 1.0, more, {}, {}, 2, 4, 10)
    counts, _ = store.tally_read("c1", "task" + SEP)
    assert len(counts) == 10
    assert counts[key("task", "ns/t0", "p")] == 6
    (cycle, _, dropped), = store.tally_cycles()
    assert (cycle, dropped) == ("c1", 2 + 3)


def test_a_failing_store_loses_the_tally_not_the_caller(make_store):
    class Down:
        def tally_merge(self, *args):
            raise ConnectionError("store is down")

    class Head:
        session_id, opened_at = "c1", 1.0

    class Task:
        namespace, name = "ns", "t0"

    class Decision:
        fits, rule, reason = True, None, ""

    tally = DecisionTally(Down(), VERBS.values(), flush_seconds=3600)
    tally.record_predicate(Head, Task, Decision)
    assert tally.flush() is False  # no exception: the record and the verb went on
    assert tally.failed_flushes == 1
    assert tally.take() == {}  # dropped, never retried: memory stays bounded
    # and recording goes on against a store that works
    tally.store = make_store()
    tally.record_predicate(Head, Task, Decision)
    assert tally.flush() is True
    assert tally.store.tally_read("c1", "task" + SEP)[0] == {key("task", "ns/t0", "p"): 1,
                                                            key("task", "ns/t0", "p" + SEP + "fit"): 1}
    tally.close()


def test_concurrent_writers_lose_nothing(make_store):
    k = key("job", "ns/j", "q" + SEP + "reject")

    def write():
        store = make_store()
        for _ in range(20):
            store.tally_merge("c1", 1.0, {k: 1}, {}, {}, 0, 4, 100)

    threads = [threading.Thread(target=write) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert make_store().tally_read("c1", "job" + SEP)[0] == {k: 80}
