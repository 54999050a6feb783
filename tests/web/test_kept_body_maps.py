"""A large body's map is kept for the next body of about its size (``web/socket_body.py``,
``keep_body_maps``), and only when nothing refers to it any more: a body still read (a name, a
msgspec ``Raw`` into it) is never written over. Served: three snapshots in a row through one
worker, the second shorter and the third longer, decide from their own bytes, and so does one
after a malformed snapshot that was refused."""

from __future__ import annotations

import io
import mmap
import weakref
from pathlib import Path

import msgspec
import orjson
import pytest

from policy_extender.web import socket_body
from policy_extender.web.dispatch import AnswerThenRelease
from tests.support.volcano import Server, VolcanoClient, body_maps

SIZE = socket_body.MAPPED_FROM


@pytest.fixture(autouse=True)
def fresh():
    socket_body.configure(True)  # nothing kept from an earlier test
    yield
    socket_body.configure(True)


def filled(length: int, byte: bytes) -> mmap.mmap | bytearray:
    mapped = socket_body._buffer(length)
    mapped[:] = byte * length
    return mapped


def test_a_map_given_back_serves_the_next_body_of_about_its_size():
    body = filled(SIZE + 4096, b"a")
    address = id(body)
    assert socket_body.give_back(body)
    del body
    assert socket_body.kept_sizes() == [SIZE + 4096]
    shorter = socket_body._buffer(SIZE)  # within SIZE_RATIO: the kept map, resized down
    assert id(shorter) == address and len(shorter) == SIZE
    assert socket_body.kept_sizes() == [], "a map taken is no longer kept: no second request gets it"
    assert socket_body.give_back(shorter)
    del shorter
    longer = socket_body._buffer(SIZE + (1 << 20))  # resized up: its new tail is fresh memory
    assert id(longer) == address and len(longer) == SIZE + (1 << 20)
    longer[-1:] = b"z"
    assert longer[-1:] == b"z"


def test_a_body_of_another_size_gets_a_map_of_its_own_and_both_are_kept():
    snapshot, prioritize = filled(4 * SIZE, b"s"), filled(SIZE, b"p")
    ids = id(snapshot), id(prioritize)
    assert socket_body.give_back(snapshot)
    del snapshot
    other = socket_body._buffer(2 * SIZE)  # outside the ratio of the one kept: a new map
    assert id(other) not in ids and socket_body.kept_sizes() == [4 * SIZE]
    assert socket_body.give_back(prioritize)
    del prioritize
    assert socket_body.kept_sizes() == [4 * SIZE, SIZE]
    assert socket_body.give_back(other)  # a third size: the oldest kept is let go
    del other
    assert socket_body.kept_sizes() == [SIZE, 2 * SIZE]
    assert socket_body.KEPT_MAPS == 2


def test_the_newest_map_of_a_size_replaces_the_one_kept():
    first = filled(SIZE, b"1")
    second = socket_body._buffer(SIZE + 100)  # another map: the first is not given back yet
    gone = weakref.ref(first)
    assert socket_body.give_back(first)
    del first
    assert socket_body.give_back(second)
    del second
    assert socket_body.kept_sizes() == [SIZE + 100]
    assert gone() is None, "the older map of the size is unmapped, not held"


def test_a_map_another_name_holds_is_not_kept():
    body = filled(SIZE, b"x")
    reader = body  # e.g. a stream that still reads it
    assert not socket_body.give_back(body)
    assert socket_body.kept_sizes() == []
    del reader
    assert socket_body.give_back(body)


def test_a_map_a_decoded_raw_points_into_is_not_kept_and_is_never_overwritten():
    document = b'{"spec": {"zone": "a"}, "name": "first"}'
    body = socket_body._buffer(SIZE)
    body[:] = document + b" " * (SIZE - len(document))

    class Doc(msgspec.Struct):
        spec: msgspec.Raw
        name: str

    # decoded from a slice, as the service decodes a body's pieces: the Raw is a view into the map
    doc = msgspec.json.decode(memoryview(body)[:len(document)], type=Doc)
    answer = AnswerThenRelease(b"{}", body)
    del body
    list(answer)
    answer.close()
    assert socket_body.kept_sizes() == [], "a Raw still reads the body: not kept"
    second = filled(SIZE, b"#")  # the next body: a map of its own
    assert bytes(doc.spec) == b'{"zone": "a"}'
    second.close()
    del doc  # the Raw gone, the first map is unmapped (not kept afterwards)
    assert socket_body.kept_sizes() == []


def test_keep_body_maps_false_unmaps_each_body_and_lets_go_of_those_kept():
    kept = filled(SIZE, b"k")
    assert socket_body.give_back(kept)
    gone = weakref.ref(kept)
    del kept
    socket_body.configure(True, keep_maps=False)
    assert socket_body.kept_sizes() == [] and gone() is None
    body = filled(SIZE, b"n")
    gone = weakref.ref(body)
    answer = AnswerThenRelease(b"{}", body)
    del body
    answer.close()
    assert gone() is None, "unmapped after its answer"


def test_each_mapped_body_is_counted_new_or_kept():
    seen: list[str] = []
    socket_body.configure(True, on_map=seen.append)
    body = filled(SIZE, b"a")
    socket_body.give_back(body)
    del body
    filled(SIZE, b"b")
    socket_body._buffer(SIZE - 1)  # below the map size: a bytearray, not counted
    assert seen == ["new", "kept"]


def test_a_body_of_a_failed_read_is_not_kept():
    """A client that hung up mid-body: the map goes with the request, nothing is kept."""
    import socket

    left, right = socket.socketpair()
    with left, right:
        right.sendall(b"q" * 1000)
        right.shutdown(socket.SHUT_WR)
        body = socket_body._buffer(SIZE)
        with memoryview(body) as view, pytest.raises(socket_body.BodyEnded):
            socket_body._receive_into(left, view, 0, None)
    del view
    assert socket_body.kept_sizes() == []


# --- served ---------------------------------------------------------------------------------

POLICY = 'filter high_priority: task.job.priority >= 100\n  reason "the job\'s priority is under 100"\n'


@pytest.mark.slow
def test_snapshots_received_into_a_kept_map_decide_from_their_own_bytes(tmp_path):
    from bench.generate import Bodies, Cluster, ClusterSpec, write_snapshot

    cluster = Cluster(ClusterSpec(nodes=80, pods_per_node=30))
    out = io.BytesIO()
    write_snapshot(cluster, out)
    high = out.getvalue()
    predicate = Bodies(cluster).predicate(0)
    job = orjson.loads(predicate)["task"]["Job"]
    data = orjson.loads(high)
    assert data["Jobs"][job]["Priority"] >= 100
    data["Jobs"][job]["Priority"] = 1
    for name in list(data["Nodes"])[:8]:  # a shorter body: the kept map is resized down
        del data["Nodes"][name]
    low = orjson.dumps(data)
    assert socket_body.MAPPED_FROM < len(low) < len(high) < len(low) * socket_body.SIZE_RATIO
    policies = tmp_path / "policies"
    policies.mkdir()
    (policies / "priority.policy").write_text(POLICY)
    server = Server(tmp_path, policies, workers=1, threads=2)
    try:
        server.wait_ready()
        client = VolcanoClient(server.port, timeout=60)
        codes = []
        for snapshot in (high, low, high):  # the last one longer again: resized up
            assert client.raw("onSessionOpen", snapshot)[0] == 200
            codes.append(client.call("predicate", orjson.loads(predicate))["code"])
            assert client.raw("onSessionClose", b"{}")[0] == 200
        # a malformed snapshot of the same size (not from Volcano): refused, received into the
        # kept map all the same; the next good one decides from its own bytes again
        broken = low[:len(low) // 2] + b"\x00" + low[len(low) // 2 + 1:]
        status, answer = client.raw("onSessionOpen", broken)
        assert client.raw("onSessionOpen", low)[0] == 200
        codes.append(client.call("predicate", orjson.loads(predicate))["code"])
        client.close()
        maps = body_maps(server.port)
    finally:
        server.stop()
    assert codes[0] == 0 and codes[1] != 0 and codes[2] == 0 and codes[3] != 0, codes
    assert status == 400 and b"onSessionOpen" in answer, answer[:300]
    assert maps == {"new": 1.0, "kept": 4.0}, maps


@pytest.mark.slow
def test_keep_body_maps_false_maps_every_snapshot_anew(tmp_path):
    from bench.generate import Cluster, ClusterSpec, write_snapshot

    out = io.BytesIO()
    write_snapshot(Cluster(ClusterSpec(nodes=70, pods_per_node=30)), out)
    server = Server(tmp_path, Path(__file__).resolve().parents[2] / "bench" / "policies", workers=1, threads=2,
                    extra_args=("--keep-body-maps", "false"))
    try:
        server.wait_ready()
        client = VolcanoClient(server.port, timeout=60)
        statuses = [client.raw("onSessionOpen", out.getvalue())[0] for _ in range(2)]
        client.close()
        maps = body_maps(server.port)
    finally:
        server.stop()
    assert statuses == [200, 200]
    assert maps == {"new": 2.0}, maps


def _tcp_pair():
    import socket

    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        sender = socket.create_connection(listener.getsockname())
        receiver, _ = listener.accept()
    return sender, receiver


def _reader(sock, buffered: bytes):
    """What ``_read`` uses of gunicorn's LengthReader (the real one: tests/served/test_socket_body.py)."""
    from types import SimpleNamespace

    return SimpleNamespace(unreader=SimpleNamespace(buf=io.BytesIO(buffered), sock=sock), length=None)


@pytest.mark.slow
def test_a_mapped_body_read_whole_arrives_byte_for_byte_into_a_kept_map():
    import threading

    length = SIZE + 12345
    data = bytes(i % 251 for i in range(251)) * (length // 251 + 1)
    data = data[:length]
    old = filled(length + 100, b"#")  # a kept map holding another body's bytes
    socket_body.give_back(old)
    del old
    sender, receiver = _tcp_pair()
    with sender, receiver:
        thread = threading.Thread(target=sender.sendall, args=(data[4096:],))
        thread.start()
        body = socket_body._read(_reader(receiver, data[:4096]), length, None)
        thread.join()
    assert type(body) is mmap.mmap and len(body) == length
    assert body[:] == data


@pytest.mark.slow
def test_a_mapped_body_that_stalls_is_cut_off_at_the_deadline():
    import time

    length = SIZE
    sender, receiver = _tcp_pair()
    with sender, receiver:
        sender.sendall(b"x" * (1 << 20))
        started = time.monotonic()
        with pytest.raises(socket_body.BodyTimeout) as raised:
            socket_body._read(_reader(receiver, b"{"), length, time.monotonic() + 1.0)
        waited = time.monotonic() - started
    assert raised.value.got == 1 + (1 << 20)
    assert 0.9 <= waited < 10, waited  # cut at the deadline, not at the next 2 MiB step
