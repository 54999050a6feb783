"""Opens and closes ordered by arrival, not by when they are stored (every store kind; conftest.py).

An onSessionOpen takes a ticket as it arrives (``begin_open``) and is stored only if no open or
close that arrived after it was stored first: an open Volcano gave up on (its ``httpTimeout``)
that finishes after the next cycle's close and open must never replace that cycle's session.
"""

from __future__ import annotations

import threading

import pytest

from policy_extender.session.store import OpenSuperseded

from .cluster import SOURCES, encode_snapshot
from .test_store_failures import record, wipe


def test_a_late_open_never_replaces_the_session_of_the_cycle_opened_after_it(make_store):
    store, other_worker = make_store(), make_store()
    late = store.begin_open()                     # arrives; decoding a big snapshot takes seconds
    other_worker.close()                          # Volcano gave up on it: the cycle's close
    newer = other_worker.open(encode_snapshot({"job-n": "queue-n"}), "v2", SOURCES,
                              other_worker.begin_open())  # the next cycle's open, stored first
    for n in range(3):
        assert other_worker.allocate(newer, f"t{n}", record(f"t{n}"))
    with pytest.raises(OpenSuperseded, match="not stored"):
        store.open(encode_snapshot({"job-old": "queue-old"}), "v1", SOURCES, late)
    head = store.head()
    assert (head.session_id, head.seq, head.policy_version) == (newer, 3, "v2")
    assert len(store.allocations(newer)) == 3
    assert store.snapshot(newer) == encode_snapshot({"job-n": "queue-n"})


def test_an_open_overtaken_by_a_close_alone_is_not_stored(make_store):
    store = make_store()
    previous = store.open(encode_snapshot(), "v1", SOURCES)
    late = store.begin_open()
    store.close()  # the cycle Volcano gave up on is closed; no next open yet
    with pytest.raises(OpenSuperseded):
        store.open(encode_snapshot(), "v1", SOURCES, late)
    assert store.head() is None and store.ended(previous)


def test_opens_that_arrive_in_turn_are_stored_in_turn(make_store):
    store = make_store()
    first = store.begin_open()
    second = store.begin_open()
    assert second > first
    stored = store.open(encode_snapshot(), "v1", SOURCES, first)  # nothing arrived later was stored
    assert store.head().session_id == stored
    newer = store.open(encode_snapshot(), "v1", SOURCES, second)
    assert store.head().session_id == newer
    untimed = store.open(encode_snapshot(), "v1", SOURCES)  # no ticket: arrived now
    assert store.head().session_id == untimed
    with pytest.raises(OpenSuperseded):
        store.open(encode_snapshot(), "v1", SOURCES, second)


def test_tickets_taken_at_once_by_many_workers_are_all_different(make_store):
    workers = [make_store() for _ in range(4)]
    tickets: list[int] = []
    lock = threading.Lock()

    def take(store) -> None:
        for _ in range(25):
            ticket = store.begin_open()
            with lock:
                tickets.append(ticket)

    threads = [threading.Thread(target=take, args=(store,)) for store in workers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(set(tickets)) == 100


def test_an_open_stored_with_a_ticket_from_before_the_store_emptied_leaves_later_tickets_greater(make_store):
    """A store that restarted empty (or a new SQLite file) starts counting again; an open in
    flight with an older, greater ticket must not make every later open look older than it."""
    store = make_store()
    for _ in range(5):
        store.begin_open()
    in_flight = store.begin_open()
    wipe(store)
    store.open(encode_snapshot(), "v1", SOURCES, in_flight)
    after = store.begin_open()
    assert after > in_flight
    assert store.open(encode_snapshot(), "v1", SOURCES, after) == store.head().session_id
