"""A whole-service restart mid-cycle with the default ``sqlite:`` store (its file is in the
runtime directory of the instance that died): the new instance takes over that file
(instance.py), its first worker finds the session still open there and marks it lost
(``lost.inherit_previous``), so every worker answers 503 for it until the next onSessionOpen.
Another command line's stale directory is left alone while its store is recent (its own
restart may come for it). tests/served/test_restart_served.py does it under gunicorn."""

from __future__ import annotations

import json
import multiprocessing
import os
import signal

import pytest

from policy_extender import instance
from policy_extender.session.lost import LOST_FILE, LostMarker, inherit_previous
from policy_extender.session.sqlite import SqliteStore
from policy_extender.session.store import SessionLost

from .cluster import SOURCES, encode_snapshot
from .test_store_failures import cache_of

pytestmark = pytest.mark.slow  # forks an instance and kills it
FORK = multiprocessing.get_context("fork")


def died_mid_cycle(parent: str, command: str | None = None) -> tuple[str, str]:
    """(runtime directory, open session id) of an instance that opened a session in its default
    store and was SIGKILLed; ``command``: the command line its owner record names instead."""
    reader, writer = FORK.Pipe(duplex=False)

    def instance_that_dies() -> None:
        directory, _ = instance.make_runtime_dir(parent)
        session_id = SqliteStore(os.path.join(directory, instance.STORE_FILE)).open(encode_snapshot(), "v1", SOURCES)
        writer.send((directory, session_id))
        os.kill(os.getpid(), signal.SIGKILL)

    process = FORK.Process(target=instance_that_dies)
    process.start()
    found = reader.recv()
    process.join()
    if command is not None:
        owner = os.path.join(found[0], instance.OWNER_FILE)
        with open(owner, encoding="utf-8") as stream:
            record = json.load(stream)
        with open(owner, "w", encoding="utf-8") as stream:
            json.dump({**record, "command": command}, stream)
    return found


def test_the_restarted_instance_answers_the_open_session_lost_until_the_next_open(tmp_path):
    parent = str(tmp_path)
    dead, session_id = died_mid_cycle(parent)
    directory, _ = instance.make_runtime_dir(parent)
    assert instance.sweep_stale(parent, successor=directory, keep_seconds=300) == [dead]
    marker = LostMarker(os.path.join(directory, LOST_FILE))
    assert inherit_previous(directory, marker) == session_id
    assert inherit_previous(directory, marker) is None  # read once, by the first worker
    store = SqliteStore(os.path.join(directory, instance.STORE_FILE))
    for worker in (cache_of(store, lost_marker=marker), cache_of(SqliteStore(store.path), lost_marker=marker)):
        with pytest.raises(SessionLost, match=session_id):
            worker.env()
    opened = store.open(encode_snapshot(), "v1", SOURCES)  # the next cycle
    worker = cache_of(store, lost_marker=marker)
    worker.session_opened()
    assert worker.env().head.session_id == opened


def test_another_commands_stale_directory_is_kept_while_its_store_is_recent(tmp_path):
    parent = str(tmp_path)
    dead, _ = died_mid_cycle(parent, command="policy-extender serve --bind 127.0.0.1:1")
    directory, _ = instance.make_runtime_dir(parent)
    assert instance.sweep_stale(parent, successor=directory, keep_seconds=300) == []
    assert not os.path.exists(os.path.join(directory, instance.PREVIOUS_STORE_FILE))
    for suffix in ("", "-wal"):  # 10 minutes later: nobody came for it
        path = os.path.join(dead, instance.STORE_FILE + suffix)
        if os.path.exists(path):
            os.utime(path, (os.path.getmtime(path) - 600, os.path.getmtime(path) - 600))
    assert instance.sweep_stale(parent, successor=directory, keep_seconds=300) == [dead]
