"""A session the store lost (it restarted empty, its file was replaced) is lost for every worker
and replica sharing the store, not only for those that had read it: the worker that finds it
gone records it in the store (``mark_lost``), and a worker of another instance that never read
the session answers 503 for the rest of that cycle instead of deciding without it. The next open
or close ends the record. (Every store kind; conftest.py.)"""

from __future__ import annotations

import pytest

from policy_extender.session.store import SessionLost

from .cluster import SOURCES, encode_snapshot
from .test_store_failures import cache_of, record, wipe


def test_a_worker_that_never_read_a_lost_session_finds_it_lost_too(make_store):
    store = make_store()
    reader, stranger = cache_of(make_store()), cache_of(make_store())  # two instances, no shared marker file
    session_id = store.open(encode_snapshot(), "v1", SOURCES)
    assert store.allocate(session_id, "t1", record("t1"))
    assert reader.env().counters.total.tasks == 1
    wipe(store)  # the store restarted empty
    with pytest.raises(SessionLost, match=f"session {session_id} vanished"):
        reader.env()
    for _ in range(2):
        with pytest.raises(SessionLost, match=f"session {session_id} vanished"):
            stranger.env()
    opened = store.open(encode_snapshot(), "v1", SOURCES)  # the next cycle
    assert stranger.env().head.session_id == opened == reader.env().head.session_id


def test_a_close_ends_the_record_of_a_lost_session(make_store):
    store = make_store()
    reader, stranger = cache_of(make_store()), cache_of(make_store())
    session_id = store.open(encode_snapshot(), "v1", SOURCES)
    reader.env()
    wipe(store)
    with pytest.raises(SessionLost):
        reader.env()
    assert store.lost() == session_id
    store.close()  # Volcano closes the cycle: calls until the next open have no session
    assert store.lost() is None
    assert stranger.env().open is False
