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
from tests.support.forking import in_forked_child

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


@pytest.mark.slow
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


# ---------------------------------------------------------------- nodes kept from predicates

import mmap  # noqa: E402
import random  # noqa: E402

from bench.generate import Bodies  # noqa: E402
from policy_extender.wire import decode, node_reuse  # noqa: E402


@pytest.fixture
def kept_cluster():
    """A 30 x 10 cluster's onSessionOpen body, with every node kept by this worker from the
    cluster's predicate bodies (Volcano's NodeInfo bytes are the same in both)."""
    node_reuse.configure(node_reuse.DEFAULT_MAX_BYTES)
    cluster = Cluster(ClusterSpec(nodes=30, pods_per_node=10))
    out = io.BytesIO()
    write_snapshot(cluster, out)
    bodies = Bodies(cluster)
    for n in range(30):
        decode.decode_predicate(bodies.predicate(n, 0, 0), READS)
    yield out.getvalue()
    node_reuse.configure(node_reuse.DEFAULT_MAX_BYTES)


@pytest.mark.parametrize("step,piece", [(1 << 20, 2 << 20), (65536, 256 << 10), (5000, 1), (64 << 20, 1 << 20)])
def test_nodes_kept_from_predicates_are_taken_and_the_result_is_the_whole_decode(kept_cluster, step, piece):
    result, stream = streamed(kept_cluster, step, piece)
    assert result == whole(kept_cluster)
    assert stream.reused == 30, "every node, the last one closing the map"
    assert stream.state == "done"


def test_a_mapped_body_takes_the_kept_nodes_too(kept_cluster):
    with mmap.mmap(-1, len(kept_cluster)) as buffer:
        buffer[:] = kept_cluster
        stream = open_stream.OpenStream(buffer, len(buffer), READS, piece_bytes=1 << 20, stream_from=0)
        arriving.feed_in_steps(stream, len(buffer), 1 << 20)
        assert snapshot.encode_snapshot(stream.finish()) == whole(kept_cluster)
        assert stream.reused == 30 and buffer[:] == kept_cluster


@pytest.mark.slow
def test_changed_and_never_kept_nodes_are_checked_between_kept_ones(kept_cluster):
    """Nodes 3, 4 and 17 changed at the same length (one digit of their idle CPU), node 25 grew,
    node 8 is keyed by another name and node 9 by a key with an escape: each is checked (a
    piece) and the rest taken; the result is the whole decoder's."""
    body = bytearray(kept_cluster)
    start = body.index(b',"Nodes":{')

    def value_of(n: int) -> int:
        return body.index(b':{"Name":"node-%04d","Node":' % n, start) + 1

    for n in (3, 4, 17):
        at = body.index(b'"Idle":{"MilliCPU":', value_of(n)) + len(b'"Idle":{"MilliCPU":')
        body[at] = ord("1") if body[at] != ord("1") else ord("2")
    at = body.index(b'"Idle":{"MilliCPU":', value_of(25)) + len(b'"Idle":{"MilliCPU":')
    body[at:at] = b"1"
    key = body.rindex(b'"node-0008"', 0, value_of(8))
    body[key:key + 11] = b'"node-X008"'
    key = body.rindex(b'"node-0009"', 0, value_of(9))
    body[key:key + 11] = b'"node\\u002d0009"'  # the same name, escaped
    body = bytes(body)
    for step, piece in ((1 << 20, 2 << 20), (65536, 256 << 10), (3000, 1)):
        result, stream = streamed(body, step, piece)
        assert result == whole(body)
        assert stream.reused == 30 - 6, (step, piece)


@pytest.mark.parametrize("damage", ["node", "node-number", "queue", "truncated", "control character in a key"])
def test_a_damaged_body_fails_like_the_whole_decoder_with_every_node_kept(kept_cluster, damage):
    body = bytearray(kept_cluster)
    nodes = body.index(b',"Nodes":{')
    if damage == "node":
        at = body.index(b'"Node":', body.index(b'node-0020', nodes))
        body[at + 6] = ord("]")
    elif damage == "node-number":
        entry = body.index(b'"node-0012":', nodes)
        body[entry:entry] = b'"junk":7,'
    elif damage == "queue":
        at = body.index(b'"Queues":{')
        body[at + 10] = ord("[")
    elif damage == "control character in a key":
        key = body.index(b'"node-0005":', nodes)
        body[key + 5] = 0x01
    else:
        body = body[:len(body) - 1000]
    body = bytes(body)
    expected = error_of(lambda: snapshot.decode_open_body(body, READS))
    assert_fails_like_the_whole_decoder(open_stream.OpenStream, body, READS, expected)


def one_byte_damages_decode_like_the_whole_decoder(good: bytes, first: int, last: int, seed: int,
                                                   before=lambda: None) -> None:
    """120 bodies, each ``good`` with one byte replaced, inserted or deleted in ``[first, last)``,
    each streamed after ``before()``: each decodes to the whole decoder's snapshot, or fails with
    its error, and is left as it came."""
    rng = random.Random(seed)
    for _ in range(120):
        body = bytearray(good)
        at = rng.randrange(first, last)
        kind = rng.choice(("replace", "insert", "delete"))
        byte = rng.choice(b'{}[]",:0a\\ \x01')
        if kind == "replace":
            body[at] = byte
        elif kind == "insert":
            body[at:at] = bytes([byte])
        else:
            del body[at]
        body = bytes(body)  # type: ignore[assignment]  # frozen for the decoders
        before()
        try:
            expected: tuple[str, object] = ("ok", whole(body))  # type: ignore[arg-type]  # bytes since bytes(body)
        except Exception as error:  # the whole decoder's error is what must come out
            expected = ("error", str(error))
        buffer = bytearray(body)
        stream = open_stream.OpenStream(buffer, len(buffer), READS, piece_bytes=256 << 10, stream_from=0)
        arriving.feed_in_steps(stream, len(buffer), 65536)
        try:
            got: tuple[str, object] = ("ok", snapshot.encode_snapshot(stream.finish()))
        except Exception as error:
            got = ("error", str(error))
        assert got == expected, (kind, at, byte)
        assert buffer == body


@pytest.mark.slow
def test_random_one_byte_damage_with_every_node_kept_never_changes_a_result_or_an_error(kept_cluster):
    """In the Nodes map, with every node kept by predicates."""
    one_byte_damages_decode_like_the_whole_decoder(kept_cluster, kept_cluster.index(b',"Nodes":{'),
                                                   kept_cluster.index(b'},"Queues":'), seed=2311)


def test_a_node_named_with_invalid_utf8_is_refused_and_never_taken():
    """A node whose name is not UTF-8 is a 400 in a predicate (not kept), and an onSessionOpen
    keyed by it fails like the whole decoder, at the byte, with every other node kept."""
    from policy_extender.errors import WireError
    node_reuse.configure(node_reuse.DEFAULT_MAX_BYTES)
    data = orjson.loads((ROOT / "tests" / "samples" / "onSessionOpen.json").read_bytes())
    name, node = next(iter(data["Nodes"].items()))
    good = orjson.dumps(node)
    raw = good.replace(name.encode(), b"bad\xff", 1)
    task = orjson.dumps(orjson.loads((ROOT / "tests" / "samples" / "predicate.json").read_bytes())["task"])
    with pytest.raises(WireError, match="invalid UTF-8 at byte"):
        decode.decode_predicate(b'{"task":' + task + b',"node":' + raw + b"}", READS)
    decode.decode_predicate(b'{"task":' + task + b',"node":' + good + b"}", READS)
    assert set(node_reuse._kept.nodes) == {name.encode()}
    head, _, tail = orjson.dumps(data).partition(b'"Nodes":{')
    body = head + b'"Nodes":{"' + name.encode() + b'":' + good + b',"bad\xff":' + raw + b"," + tail
    expected = error_of(lambda: snapshot.decode_open_body(body, READS))
    assert "invalid UTF-8 at byte" in expected
    assert_fails_like_the_whole_decoder(open_stream.OpenStream, body, READS, expected)
    node_reuse.configure(node_reuse.DEFAULT_MAX_BYTES)


# ---------------------------------------------------------------- jobs kept from the worker's last open

@pytest.fixture
def job_cluster():
    """A 30 x 10 cluster's body (33 jobs), with no jobs kept from an earlier open."""
    open_stream._forget_jobs()
    cluster = Cluster(ClusterSpec(nodes=30, pods_per_node=10))
    out = io.BytesIO()
    write_snapshot(cluster, out)
    yield out.getvalue()
    open_stream._forget_jobs()


def job_values(body: bytes) -> list[tuple[int, int]]:
    """(start, end) of each job entry's value, in order (the generator's compact layout: a job's
    value starts ``{"UID":"…","PgUID":``, a task's has no PgUID)."""
    import re
    first = body.index(b'{"Jobs":{') + len(b'{"Jobs":{') - 1
    end = body.index(b'},"Nodes":{')
    starts = [m.start(1) for m in re.finditer(rb'[{,]"[^"\\]*":(\{"UID":"[^"\\]*","PgUID":)', body[:end])
              if m.start() >= first]
    return [(value, body.rindex(b',"', 0, starts[i + 1]) if i + 1 < len(starts) else end)
            for i, value in enumerate(starts)]


@pytest.mark.parametrize("step,piece", [(1 << 20, 2 << 20), (65536, 256 << 10), (5000, 1)])
@pytest.mark.slow
def test_an_open_takes_the_jobs_the_workers_last_open_decoded(job_cluster, step, piece):
    first, stream = streamed(job_cluster, step, piece)
    assert first == whole(job_cluster) and stream.jobs_reused == 0
    again, stream = streamed(job_cluster, step, piece)
    assert again == whole(job_cluster)
    assert stream.jobs_reused == 33, "every job, the last one closing the map"


@pytest.mark.slow
def test_changed_new_and_gone_jobs_are_decoded_and_the_rest_taken(job_cluster):
    """After an open, the next one has job 2 changed at the same length, job 5 grown, job 9 gone,
    a job added in front and job 20 keyed with an escape: the result is the whole decoder's and
    the other jobs are taken."""
    streamed(job_cluster, 1 << 20, 2 << 20)
    body = bytearray(job_cluster)
    spans = job_values(job_cluster)
    assert len(spans) == 33
    edits = []
    s, e = spans[2]
    at = body.index(b'"MinAvailable":', s) + len(b'"MinAvailable":')
    edits.append((at, at + 1, b"7"))
    s, e = spans[5]
    at = body.index(b'"Priority":', s) + len(b'"Priority":')
    edits.append((at, at, b"1"))
    s9, e9 = spans[9]
    key9 = body.rindex(b',"', 0, s9)
    edits.append((key9, e9, b""))
    s20, _ = spans[20]
    key20 = body.rindex(b',"', 0, s20) + 2
    edits.append((key20, key20 + 1, b"\\u006d"))  # "ml/..." -> "\u006dl/...": the same key, escaped
    s0, e0 = spans[0]
    head = body.index(b'{"Jobs":{') + len(b'{"Jobs":{')
    new = bytes(body[head:e0]).replace(b'ml/run-00000', b'ml/new-00000').replace(b'"MinAvailable":4', b'"MinAvailable":3')
    edits.append((head, head, new + b","))
    for start, stop, text in sorted(edits, reverse=True):
        body[start:stop] = text
    body = bytes(body)
    for step, piece in ((1 << 20, 2 << 20), (65536, 256 << 10), (3000, 1)):
        streamed(job_cluster, 1 << 20, 2 << 20)  # the jobs of the body before the changes
        result, stream = streamed(body, step, piece)
        assert result == whole(body)
        assert stream.jobs_reused == 33 - 4, (step, piece)  # all but jobs 2, 5, 9 (gone) and 20
        again, stream = streamed(body, step, piece)  # the changed body's jobs are the kept ones now
        assert again == whole(body) and stream.jobs_reused == 33 - 1, "all but job 20 (escaped)"


@pytest.mark.parametrize("damage", ["job", "job-number", "truncated", "unterminated key"])
def test_a_damaged_body_fails_like_the_whole_decoder_with_its_jobs_kept(job_cluster, damage):
    streamed(job_cluster, 1 << 20, 2 << 20)
    body = bytearray(job_cluster)
    spans = job_values(job_cluster)
    if damage == "job":
        at = body.index(b'"PgUID"', spans[6][0])
        body[at + 1] = ord("\\")
    elif damage == "job-number":
        body[spans[4][0]:spans[4][0]] = b'7,"junk":'
    elif damage == "unterminated key":
        key = body.rindex(b',"', 0, spans[8][0])
        body[spans[8][0] - 2] = ord("x")  # the key's closing quote
        del key
    else:
        body = body[:spans[12][0] + 50]
    body = bytes(body)
    expected = error_of(lambda: snapshot.decode_open_body(body, READS))
    assert_fails_like_the_whole_decoder(open_stream.OpenStream, body, READS, expected)
    again, stream = streamed(job_cluster, 1 << 20, 2 << 20)
    assert again == whole(job_cluster) and stream.jobs_reused == 33, "a failed open replaced no kept job"


@pytest.mark.slow
def test_random_one_byte_damage_with_every_job_kept_never_changes_a_result_or_an_error(job_cluster):
    """In the Jobs map, each right after the undamaged body (so its jobs are kept)."""
    one_byte_damages_decode_like_the_whole_decoder(
        job_cluster, job_cluster.index(b'{"Jobs":{'), job_cluster.index(b'},"Nodes":{'), seed=2312,
        before=lambda: streamed(job_cluster, 65536, 256 << 10))


def test_a_read_set_change_takes_no_kept_job(job_cluster):
    from policy_extender.policyset.compile import compile_sources
    streamed(job_cluster, 1 << 20, 2 << 20)
    other = compile_sources({"o.policy": "filter node.name != \"x\"\n"}).reads
    buffer = bytearray(job_cluster)
    stream = open_stream.OpenStream(buffer, len(buffer), other, piece_bytes=2 << 20, stream_from=0)
    arriving.feed_in_steps(stream, len(buffer), 1 << 20)
    assert snapshot.encode_snapshot(stream.finish()) == snapshot.encode_snapshot(snapshot.decode_open_body(job_cluster, other))
    assert stream.jobs_reused == 0


@pytest.mark.slow
def test_a_forked_worker_keeps_no_job_of_its_parent(job_cluster):
    streamed(job_cluster, 1 << 20, 2 << 20)
    assert open_stream._kept_jobs.entries
    kept_in_child = int(in_forked_child(lambda: str(len(open_stream._kept_jobs.entries))))
    assert kept_in_child == 0


def test_an_entry_found_by_no_entry_start_is_never_skipped_with_a_kept_job(job_cluster):
    """A null job (``"x":null``) after job 3 has no ``"UID"``/``"PgUID"`` start, so job 3 is decoded
    together with it: that span holds two entries and is not kept as job 3, else the next open
    would take job 3 and skip the null entry the whole decoder keeps."""
    spans = job_values(job_cluster)
    body = job_cluster[:spans[3][1]] + b',"x":null' + job_cluster[spans[3][1]:]
    for _ in range(2):
        result, stream = streamed(body, 1 << 20, 2 << 20)
        assert result == whole(body)
    assert "x" not in open_stream._kept_jobs.entries and "x" in orjson.loads(body)["Jobs"]


def test_node_reuse_off_keeps_no_job(job_cluster):
    node_reuse.configure(0)
    try:
        for _ in range(2):
            result, stream = streamed(job_cluster, 1 << 20, 2 << 20)
            assert result == whole(job_cluster) and stream.jobs_reused == 0
        assert not open_stream._kept_jobs.entries
    finally:
        node_reuse.configure(node_reuse.DEFAULT_MAX_BYTES)


@pytest.mark.parametrize("kept_first", [False, True], ids=["first open", "jobs kept"])
def test_the_jobs_map_closes_while_the_body_arrives(job_cluster, kept_first):
    """The Nodes map is checked while it arrives whether the jobs were decoded alone or taken:
    the Jobs map is closed long before the last byte (it was held until then when every job had
    been taken, so the nodes were all checked after the last byte)."""
    if kept_first:
        streamed(job_cluster, 1 << 20, 2 << 20)
    nodes_at = job_cluster.index(b'},"Nodes":{')
    assert len(job_cluster) - nodes_at > (1 << 20) + 200_000
    buffer = bytearray(job_cluster)
    stream = open_stream.OpenStream(buffer, len(buffer), READS, piece_bytes=256 << 10, stream_from=0)
    arriving.feed_in_steps(stream, len(buffer) - 200_000, 65536)
    assert stream.state in ("nodes", "done"), stream.state
    assert stream.jobs_reused == (33 if kept_first else 0)
    arriving.feed_in_steps(stream, len(buffer), 65536)
    assert snapshot.encode_snapshot(stream.finish()) == whole(job_cluster)


def test_only_volcanos_map_end_closes_the_jobs_map_after_a_kept_job(job_cluster):
    """After the last kept job, ``},"Extra":{},"Nodes":{`` is not the Jobs map's end marker: that
    job is not taken (the pieces find where the map ends) and the result is the whole decoder's."""
    streamed(job_cluster, 1 << 20, 2 << 20)
    end = job_cluster.index(b'},"Nodes":{')
    body = job_cluster[:end] + b'},"Extra":{}' + job_cluster[end + 1:]
    result, stream = streamed(body, 1 << 20, 2 << 20)
    assert result == whole(body)
    assert stream.jobs_reused == 32, "the last job is followed by no marker: decoded, not taken"
