"""Generated request ids are version-4 UUIDs in hex, as ``uuid.uuid4().hex`` gives, and distinct:
within a process, across its threads, and across forked workers."""

import threading
import uuid

import pytest

from policy_extender import logs
from tests.support.forking import in_forked_child


def test_generated_ids_are_uuid4_hex_and_distinct():
    ids = [logs.new_request_id() for _ in range(2000)]
    assert len(set(ids)) == len(ids)
    for text in ids:
        parsed = uuid.UUID(hex=text)
        assert (parsed.version, parsed.variant, parsed.hex) == (4, uuid.RFC_4122, text)


def test_a_sane_caller_id_is_kept_and_an_insane_one_replaced():
    assert logs.request_id_from("from-volcano") == "from-volcano"
    replaced = logs.request_id_from("has space")
    assert replaced != "has space" and uuid.UUID(hex=replaced).version == 4


@pytest.mark.slow
def test_forked_workers_draw_other_ids_than_their_parent_and_each_other():
    draw = lambda: " ".join(logs.new_request_id() for _ in range(200))  # noqa: E731
    logs.new_request_id()  # the parent holds a drawn batch when it forks, as gunicorn's master may
    first, second = in_forked_child(draw).split(), in_forked_child(draw).split()
    mine = draw().split()
    assert len(first) == len(second) == 200
    assert not set(first) & set(mine) and not set(second) & set(mine) and not set(first) & set(second)



def test_ids_drawn_by_threads_at_once_are_distinct():
    """The gthread workers' threads draw ids at the same time (one counter per process)."""
    drawn: list[list[str]] = [[] for _ in range(8)]
    start = threading.Barrier(8)

    def draw(into: list[str]) -> None:
        start.wait()
        into.extend(logs.new_request_id() for _ in range(5000))

    threads = [threading.Thread(target=draw, args=(into,)) for into in drawn]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    every = [rid for ids in drawn for rid in ids]
    assert len(every) == 40000 and len(set(every)) == 40000
