"""The disk fills during onSessionOpen (a real 1 MiB tmpfs under the SQLite store): the open
fails, and the previous cycle's session must not stay current, or the cycle's calls would decide
from the last cycle's snapshot and allocations; they see no session instead (as after an open
that timed out), and the next open that fits is stored as usual."""

from __future__ import annotations

import os
import sqlite3

import pytest

from policy_extender.session.sqlite import SqliteStore

from .cluster import SOURCES, encode_snapshot
from .small_disk import small_tmpfs
from .test_store_failures import cache_of, record

pytestmark = pytest.mark.slow  # mounts a file system


@pytest.fixture
def full_disk(tmp_path):
    with small_tmpfs(tmp_path / "small", "1m") as directory:
        yield directory


def test_an_open_the_full_disk_refuses_ends_the_previous_session(full_disk):
    store = SqliteStore(str(full_disk / "sessions.sqlite3"))
    other_worker = cache_of(SqliteStore(store.path))
    previous = store.open(encode_snapshot(), "v1", SOURCES)
    assert store.allocate(previous, "t1", record("t1"))
    assert other_worker.env().counters.total.tasks == 1
    with pytest.raises(sqlite3.OperationalError, match="full"):
        store.open(os.urandom(2 << 20), "v1", SOURCES)  # twice the file system
    assert store.head() is None and store.ended(previous)
    env = other_worker.env()  # no session, not the previous one, and not a lost one
    assert env.open is False
    fits = store.open(encode_snapshot(), "v2", SOURCES)
    assert other_worker.env().head.session_id == fits
