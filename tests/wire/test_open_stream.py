"""onSessionOpen decoded while it arrives (``wire/open_stream.py``) gives exactly the whole-body
decoder's snapshot and errors, whatever the arrival steps, and leaves the body as it came."""

from __future__ import annotations

import io
from pathlib import Path

import orjson
import pytest

from bench.generate import Cluster, ClusterSpec, write_snapshot
from policy_extender.policyset.compile import load_directories
from policy_extender.wire import arriving, open_stream, snapshot
from tests.wire.streams import assert_fails_like_the_whole_decoder, error_of

ROOT = Path(__file__).resolve().parents[2]
READS = load_directories([ROOT / "bench" / "policies"]).reads


@pytest.fixture(scope="module")
def sample() -> bytes:
    """The sample body as Go sends it: compact."""
    return orjson.dumps(orjson.loads((ROOT / "tests" / "samples" / "onSessionOpen.json").read_bytes()))


@pytest.fixture(scope="module")
def cluster_body() -> bytes:
    """A 50 x 20 cluster's body (bench.generate, Volcano's shape, 18 MB)."""
    out = io.BytesIO()
    write_snapshot(Cluster(ClusterSpec(nodes=50, pods_per_node=20)), out)
    return out.getvalue()


def whole(body: bytes) -> bytes:
    return snapshot.encode_snapshot(snapshot.decode_open_body(body, READS))


def streamed(body: bytes, step: int, piece: int) -> tuple[bytes, open_stream.OpenStream]:
    buffer = bytearray(body)
    stream = open_stream.OpenStream(buffer, len(buffer), READS, piece_bytes=piece, stream_from=0)
    arriving.feed_in_steps(stream, len(buffer), step)
    result = snapshot.encode_snapshot(stream.finish())
    assert buffer == body, "the body must be left as it arrived"
    return result, stream



@pytest.mark.parametrize("step,piece", [(1000, 1), (4096, 2000), (7, 3000), (100_000, 100)])
def test_sample_body_in_any_steps_is_the_whole_decode(sample, step, piece):
    result, stream = streamed(sample, step, piece)
    assert result == whole(sample)
    assert stream.pieces > 0 and stream.state == "done"


@pytest.mark.parametrize("step,piece", [(1 << 20, 2 << 20), (65536, 256 << 10), (3 << 20, 1 << 20)])
def test_cluster_body_is_decoded_in_pieces_to_the_whole_decode(cluster_body, step, piece):
    result, stream = streamed(cluster_body, step, piece)
    assert result == whole(cluster_body)
    assert stream.pieces >= 4, "a Volcano-shaped body must be decoded while it arrives"
    assert stream.jobs_span[1] > stream.jobs_span[0] and stream.nodes_span[1] > stream.nodes_span[0]


def test_small_bodies_are_not_streamed_by_default(sample):
    stream = open_stream.OpenStream(bytearray(sample), len(sample), READS)
    assert stream.state == "off"
    assert snapshot.encode_snapshot(stream.finish()) == whole(sample)


def job_entries(entries) -> bytes:
    return b",".join(orjson.dumps(key) + b":" + orjson.dumps(value) for key, value in entries)


def test_a_later_jobs_key_replaces_the_streamed_map_as_in_the_whole_decode(sample):
    data = orjson.loads(sample)
    late = dict(next(iter(data["Jobs"].values())), UID="late-job", Name="late-job")
    body = sample[:-1] + b',"Jobs":{' + job_entries([("late-job", late)]) + b"}}"
    result, stream = streamed(body, 500, 1)
    assert stream.pieces > 0
    assert result == whole(body)
    assert b"late-job" in result and b"job-001" not in result


def test_a_repeated_job_key_keeps_its_first_place_and_last_value(sample):
    data = orjson.loads(sample)
    jobs = list(data["Jobs"].items())
    renamed = (jobs[0][0], dict(jobs[0][1], Name="renamed"))
    rest = orjson.dumps({key: value for key, value in data.items() if key != "Jobs"})
    body = b'{"Jobs":{' + job_entries([*jobs, renamed]) + b"}," + rest[1:]
    result, _ = streamed(body, 300, 1)
    assert result == whole(body)
    assert b"renamed" in result


def test_entry_starts_matched_inside_a_job_fall_back_to_the_whole_decode(sample):
    """A job carrying a map whose entries look like job entries: the piece cut there does not
    decode, the stream stops and the whole decoder answers (same snapshot)."""
    data = orjson.loads(sample)
    for job in data["Jobs"].values():
        job["Extra"] = {"a": {"UID": "x", "PgUID": "y"}, "b": {"UID": "z", "PgUID": "w"}}
    body = orjson.dumps(data)
    result, stream = streamed(body, 200, 1)
    assert result == whole(body)


@pytest.mark.parametrize("damage", ["job", "node", "queue", "truncated", "node-number"])
def test_a_malformed_body_fails_with_the_whole_decoders_error(cluster_body, damage):
    body = bytearray(cluster_body)
    if damage == "job":
        at = body.index(b'"PgUID"', 5_000_000)
        body[at + 1] = ord("\\")  # an invalid escape inside a key, mid-Jobs
    elif damage == "node":
        at = body.index(b'"Node":', body.index(b'"Nodes":{') + 3_000_000)
        body[at + 6] = ord("]")
    elif damage == "queue":
        at = body.index(b'"Queues":{')
        body[at + 10] = ord("[")
    elif damage == "node-number":
        start = body.index(b'"Nodes":{') + 9
        entry = body.index(b'{"Name"', start)
        body[entry:entry] = b'7,"junk":'
    else:
        body = body[:len(body) - 1000]
    body = bytes(body)
    expected = error_of(lambda: snapshot.decode_open_body(body, READS))
    assert_fails_like_the_whole_decoder(open_stream.OpenStream, body, READS, expected)


def test_a_body_in_another_key_order_is_decoded_whole(sample):
    data = orjson.loads(sample)
    body = orjson.dumps({"Queues": data["Queues"], "Nodes": data["Nodes"], "Jobs": data["Jobs"]})
    result, stream = streamed(body, 100, 1)
    assert stream.pieces == 0
    assert result == whole(body)
