"""SqliteStore specifics: where the file goes, WAL mode, and many workers starting at once."""

from __future__ import annotations

import multiprocessing
import os
import sqlite3

import pytest

from policy_extender.session.sqlite import DEFAULT_FILE_NAME, SqliteStore, default_path


@pytest.mark.skipif(not os.path.isdir("/dev/shm"), reason="this host has no /dev/shm")
def test_the_default_file_is_on_tmpfs_in_a_directory_of_this_process_only():
    path = default_path()
    directory = os.path.dirname(path)
    assert os.path.basename(path) == DEFAULT_FILE_NAME
    assert os.path.dirname(directory) == "/dev/shm"
    assert os.stat(directory).st_mode & 0o777 == 0o700


def test_the_file_is_in_wal_mode(tmp_path):
    path = str(tmp_path / "s.sqlite3")
    SqliteStore(path).head()
    assert sqlite3.connect(path).execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def _start_and_write(path: str, index: int, results) -> None:
    try:
        store = SqliteStore(path)
        head = store.head()
        if head is not None:
            store.allocate(head.session_id, f"task-{index}", b"r")
        results.put(None)
    except Exception as exc:  # reported to the parent
        results.put(repr(exc))


@pytest.mark.slow
def test_many_workers_starting_on_a_fresh_file_all_succeed(tmp_path):
    """Switching a fresh file to WAL does not wait on the busy timeout; 16 workers racing to
    do it once failed with "database is locked" now and then."""
    context = multiprocessing.get_context("fork")
    for attempt in range(3):
        path, results = str(tmp_path / f"fresh-{attempt}.sqlite3"), context.Queue()
        workers = [context.Process(target=_start_and_write, args=(path, n, results)) for n in range(16)]
        for worker in workers:
            worker.start()
        errors = [results.get(timeout=60) for _ in workers]
        for worker in workers:
            worker.join()
        assert [error for error in errors if error] == []
