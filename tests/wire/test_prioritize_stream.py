"""prioritize decoded while it arrives (``wire/prioritize_stream.py``) gives exactly the whole-body
decoder's task and nodes, and its errors, whatever the arrival steps, and leaves the body as it
came; a body in another shape is decoded whole."""

from __future__ import annotations

import mmap
import random
from pathlib import Path

import orjson
import pytest

from bench.generate import Bodies, Cluster, ClusterSpec
from policy_extender.errors import WireError
from policy_extender.policyset.compile import load_directories
from policy_extender.wire import arriving, decode, node_reuse, prioritize_stream
from policy_extender.wire.reading import freeze_reads
from tests.wire.streams import assert_fails_like_the_whole_decoder, error_of

ROOT = Path(__file__).resolve().parents[2]
READS = load_directories([ROOT / "bench" / "policies"]).reads


@pytest.fixture(autouse=True)
def nothing_kept():
    """Each test starts with no predicate nodes kept (``wire.node_reuse``)."""
    node_reuse.configure(node_reuse.DEFAULT_MAX_BYTES)
    yield
    node_reuse.configure(node_reuse.DEFAULT_MAX_BYTES)


@pytest.fixture(scope="module")
def sample() -> bytes:
    """The sample body as Go sends it: compact."""
    return orjson.dumps(orjson.loads((ROOT / "tests" / "samples" / "prioritize.json").read_bytes()))


@pytest.fixture(scope="module")
def cluster_body() -> bytes:
    """Every node of a 40 x 20 cluster (bench.generate, Volcano's shape, ~5 MB)."""
    return Bodies(Cluster(ClusterSpec(nodes=40, pods_per_node=20))).prioritize()


def whole(body: bytes) -> tuple:
    decoded = decode.prioritize_body_decoder(freeze_reads(READS)).decode(body)
    return decoded.task, decoded.nodes


def streamed(body: bytes, step: int, piece: int) -> tuple[tuple, prioritize_stream.PrioritizeStream]:
    buffer = bytearray(body)
    stream = prioritize_stream.PrioritizeStream(buffer, len(buffer), READS, piece_bytes=piece, stream_from=0)
    arriving.feed_in_steps(stream, len(buffer), step)
    result = stream.finish()
    assert buffer == body, "the body must be left as it arrived"
    return result, stream



def with_nodes(sample: bytes, nodes: list, tail: bytes = b"") -> bytes:
    data = orjson.loads(sample)
    return b'{"task":' + orjson.dumps(data["task"]) + b',"nodes":[' + b",".join(
        b"null" if n is None else orjson.dumps(n) for n in nodes) + b"]" + tail + b"}"


def renamed(sample: bytes, count: int) -> list:
    node = orjson.loads(sample)["nodes"][0]
    return [dict(node, Name=f"node-{i}") for i in range(count)]


@pytest.mark.parametrize("step,piece", [(1000, 1), (4096, 2000), (7, 3000), (100_000, 100)])
def test_sample_body_in_any_steps_is_the_whole_decode(sample, step, piece):
    body = with_nodes(sample, renamed(sample, 6))
    result, stream = streamed(body, step, piece)
    assert result == whole(body)
    assert stream.pieces > 0 and len(result[1]) == 6


@pytest.mark.parametrize("step,piece", [(1 << 20, 1 << 20), (65536, 256 << 10), (3 << 20, 512 << 10)])
def test_cluster_body_is_decoded_in_pieces_to_the_whole_decode(cluster_body, step, piece):
    result, stream = streamed(cluster_body, step, piece)
    assert result == whole(cluster_body)
    assert len(result[1]) == 40
    assert stream.pieces >= 3, "a Volcano-shaped body must be decoded while it arrives"
    assert len(stream.nodes) < 40, "the last nodes are left to the finishing decode"


def test_small_bodies_are_not_streamed_by_default(sample):
    stream = prioritize_stream.PrioritizeStream(bytearray(sample), len(sample), READS)
    assert stream.state == "off" and not stream.feed(len(sample))
    assert stream.finish() == whole(sample)


def test_null_elements_stay_where_the_whole_decode_has_them(sample):
    nodes = renamed(sample, 5)
    body = with_nodes(sample, [None, nodes[0], None, *nodes[1:], None])
    result, stream = streamed(body, 300, 1)
    assert stream.pieces > 0
    assert result == whole(body)
    assert [n is None for n in result[1]] == [True, False, True, False, False, False, False, True]


def test_a_later_nodes_key_replaces_the_streamed_list_as_in_the_whole_decode(sample):
    late = dict(orjson.loads(sample)["nodes"][0], Name="late-node")
    body = with_nodes(sample, renamed(sample, 5), b',"nodes":[' + orjson.dumps(late) + b"]")
    result, stream = streamed(body, 500, 1)
    assert stream.pieces > 0
    assert result == whole(body)
    assert [n.Name for n in result[1]] == ["late-node"]


def test_a_later_null_nodes_key_reads_as_no_nodes(sample):
    body = with_nodes(sample, renamed(sample, 4), b',"nodes":null')
    result, stream = streamed(body, 500, 1)
    assert stream.pieces > 0 and result == whole(body) and result[1] is None


def test_an_integer_element_fails_with_the_whole_decoders_error(sample):
    """The skeleton decoder accepts integers (its sentinel); one from the body is the whole
    decoder's error, after the pieces or among them."""
    nodes = renamed(sample, 5)
    for body in (with_nodes(sample, nodes)[:-2] + b",7]}",
                 with_nodes(sample, nodes, b',"nodes":[3]')):
        expected = error_of(lambda: decode.decode_prioritize(body, READS))
        buffer = bytearray(body)
        stream = prioritize_stream.PrioritizeStream(buffer, len(buffer), READS, piece_bytes=1, stream_from=0)
        arriving.feed_in_steps(stream, len(buffer), 300)
        assert stream.pieces > 0
        with pytest.raises(WireError) as caught:
            stream.finish()
        assert str(caught.value) == expected


def test_entry_starts_matched_inside_a_node_fall_back_to_the_whole_decode(sample):
    """A node carrying a list whose elements look like node entries: the piece cut there does
    not decode, the stream stops and the whole decoder answers (same nodes)."""
    nodes = renamed(sample, 4)
    for node in nodes:
        node["Extra"] = [{"Name": "x", "Node": 1}, {"Name": "y", "Node": 2}]
    body = with_nodes(sample, nodes)
    result, stream = streamed(body, 200, 1)
    assert result == whole(body)


def test_a_task_holding_the_list_marker_is_decoded_whole(sample):
    """``},"nodes":[`` inside the task (a nested object then a "nodes" list of node-shaped
    objects, which would decode as pieces): the task check at that point fails and nothing is
    streamed."""
    data = orjson.loads(sample)
    data["task"]["Extra"] = {"a": {}, "nodes": renamed(sample, 3)}
    body = orjson.dumps({"task": data["task"], "nodes": renamed(sample, 4)})
    assert body.index(b'},"nodes":[{') < body.index(b'"nodes":[', body.index(b"Extra") + 100)
    result, stream = streamed(body, 100, 1)
    assert stream.pieces == 0 and stream.state == "off"
    assert result == whole(body)


def damaged(cluster_body: bytes, damage: str) -> bytes:
    """The cluster body with one kind of damage well inside its node list."""
    body = bytearray(cluster_body)
    if damage == "node":
        at = body.index(b'"Node":', 3_000_000)
        body[at + 6] = ord("]")
    elif damage == "task":
        body[body.index(b'"Name"')] = ord("[")
    elif damage == "node-number":
        at = body.index(b',{"Name"', 2_000_000)
        body[at + 1:at + 1] = b"7,"
    elif damage == "escape":
        at = body.index(b'"Node"', 2_500_000)
        body[at + 1] = ord("\\")
    elif damage == "after a kept node":
        at = body.index(b',{"Name"', 1_000_000)
        body[at] = ord(":")
    else:
        body = body[:len(body) - 1000]
    return bytes(body)


@pytest.mark.parametrize("damage", ["node", "truncated", "task", "node-number", "escape"])
def test_a_malformed_body_fails_with_the_whole_decoders_error(cluster_body, damage):
    body = damaged(cluster_body, damage)
    expected = error_of(lambda: decode.decode_prioritize(body, READS))
    assert_fails_like_the_whole_decoder(prioritize_stream.PrioritizeStream, body, READS, expected)


def test_a_body_in_another_shape_is_decoded_whole(sample):
    data = orjson.loads(sample)
    nodes = renamed(sample, 4)
    for body in (orjson.dumps({"nodes": nodes, "task": data["task"]}),
                 orjson.dumps({"task": data["task"], "nodes": nodes}, option=orjson.OPT_INDENT_2)):
        result, stream = streamed(body, 100, 1)
        assert stream.pieces == 0
        assert result == whole(body)


def test_decode_prioritize_finishes_a_handed_over_stream_only_for_its_body_and_read_set(cluster_body):
    """The handler's decoder takes the stream the body reader handed over for this very body
    and read set; for another body, or another policy set's reads, it decodes whole."""
    buffer = bytearray(cluster_body)
    stream = prioritize_stream.PrioritizeStream(buffer, len(buffer), READS, piece_bytes=1 << 20, stream_from=0)
    arriving.feed_in_steps(stream, len(buffer), 1 << 20)
    assert stream.pieces > 0
    arriving.hand_over(buffer, None, stream)
    request = decode.decode_prioritize(buffer, READS)
    assert [n.name for n in request.nodes] == [n.Name for n in whole(cluster_body)[1]]
    assert arriving.take(buffer) is None, "taken once"

    sentinel_nodes = [object()]
    stream.finish = lambda: (whole(cluster_body)[0], sentinel_nodes)  # would be visible if used
    other_reads = {"node": frozenset({("Name",)})}
    arriving.hand_over(buffer, None, stream)
    assert len(decode.decode_prioritize(buffer, other_reads).nodes) == 40
    arriving.hand_over(bytearray(cluster_body), None, stream)
    assert len(decode.decode_prioritize(buffer, READS).nodes) == 40


# ---------------------------------------------------------------- nodes kept by predicates

CLUSTER = ClusterSpec(nodes=40, pods_per_node=20)


def keep(bodies: Bodies, indices) -> None:
    """What the cycle's predicates leave in this worker: these nodes decoded and kept."""
    for i in indices:
        decode.decode_predicate(bodies.predicate(i, 0, 0), READS)


def streamed_in(buffer, body: bytes, step: int, piece: int) -> tuple[tuple, prioritize_stream.PrioritizeStream]:
    stream = prioritize_stream.PrioritizeStream(buffer, len(buffer), READS, piece_bytes=piece, stream_from=0)
    arriving.feed_in_steps(stream, len(buffer), step)
    result = stream.finish()
    assert buffer[:] == body, "the body must be left as it arrived"
    return result, stream


@pytest.mark.parametrize("step,piece", [(1 << 20, 1 << 20), (65536, 256 << 10), (7000, 1)])
def test_kept_nodes_are_taken_while_the_body_arrives_to_the_whole_decode(cluster_body, step, piece):
    keep(Bodies(Cluster(CLUSTER)), range(40))
    result, stream = streamed(cluster_body, step, piece)
    assert result == whole(cluster_body)
    assert stream.reused == 39 and stream.pieces == 0, "every node but the last (left to finish) taken, none decoded"
    assert all(a is b for a, b in zip(stream.nodes, result[1])), "the kept structs themselves"


def test_kept_nodes_are_taken_from_a_mapped_body_too(cluster_body):
    """Bodies from 32 MiB on arrive in an anonymous map (``web/socket_body.py``), which has no
    ``startswith``: the comparison is a ``find`` confined to one place."""
    keep(Bodies(Cluster(CLUSTER)), range(40))
    buffer = mmap.mmap(-1, len(cluster_body))
    buffer[:] = cluster_body
    result, stream = streamed_in(buffer, cluster_body, 1 << 20, 1 << 20)
    assert result == whole(cluster_body) and stream.reused == 39


@pytest.mark.parametrize("step,piece", [(1 << 20, 1 << 20), (65536, 256 << 10), (7000, 1)])
def test_kept_changed_and_never_kept_nodes_mixed_give_the_whole_decode(step, piece):
    """Every third node never kept, every fifth changed since it was kept (same name, its idle
    GPUs flipped at the same length): those are decoded, the others taken."""
    bodies = Bodies(Cluster(CLUSTER))
    keep(bodies, [i for i in range(40) if i % 3])
    data = orjson.loads(bodies.prioritize())
    changed = 0
    for i, node in enumerate(data["nodes"]):
        if i % 5 == 0 and i % 3:
            before = orjson.dumps(node)
            node["Idle"]["MilliCPU"] = node["Idle"]["MilliCPU"] + 1
            assert len(orjson.dumps(node)) == len(before)
            changed += 1
    body = b'{"task":' + orjson.dumps(data["task"]) + b',"nodes":[' + b",".join(map(orjson.dumps, data["nodes"])) + b"]}"
    result, stream = streamed(body, step, piece)
    expected = whole(body)
    assert result == expected
    original = whole(bodies.prioritize())[1]
    assert [i for i in range(40) if result[1][i] != original[i]] == [5, 10, 20, 25, 35], "the changes are seen"
    taken = sum(1 for i in range(39) if i % 3 and not (i % 5 == 0))
    assert 0 < stream.reused <= taken
    if piece == 1:
        assert stream.reused == taken, "pieces of one element decode no kept node"
    assert stream.pieces > 0


def test_after_a_kept_node_the_next_node_alone_is_decoded_not_a_run(cluster_body):
    """While more nodes were taken than decoded alone, a node not kept is decoded as a piece of
    its own, so that the kept nodes after it are still taken."""
    bodies = Bodies(Cluster(CLUSTER))
    keep(bodies, [i for i in range(40) if i != 10])
    result, stream = streamed(cluster_body, 1 << 20, 2 << 20)
    assert result == whole(cluster_body)
    assert stream.reused == 38 and stream.pieces == 1 and stream.alone == 1


def test_kept_nodes_all_first_cost_two_elements_alone_then_pieces(cluster_body):
    """A worker whose bound let it keep only the cycle's first nodes: those are taken, the next
    two decoded alone, and the rest in pieces of ``piece_bytes`` as before."""
    keep(Bodies(Cluster(CLUSTER)), range(10))
    result, stream = streamed(cluster_body, 1 << 20, 1 << 20)
    assert result == whole(cluster_body)
    assert stream.reused == 10 and stream.alone == 2 and stream.pieces >= 4


def test_few_kept_nodes_leave_the_pieces_as_they_were(cluster_body):
    """A body of few kept nodes among many: pieces of ``piece_bytes`` as before (deciding each
    element alone costs a search over it)."""
    keep(Bodies(Cluster(CLUSTER)), [20])
    result, stream = streamed(cluster_body, 1 << 20, 1 << 20)
    assert result == whole(cluster_body)
    assert stream.alone == 0 and stream.pieces >= 3


@pytest.mark.parametrize("damage", ["node", "truncated", "node-number", "escape", "after a kept node"])
def test_a_malformed_body_with_kept_nodes_fails_with_the_whole_decoders_error(cluster_body, damage):
    keep(Bodies(Cluster(CLUSTER)), range(40))
    body = damaged(cluster_body, damage)
    expected = error_of(lambda: node_reuse_off(lambda: decode.decode_prioritize(body, READS)))
    assert_fails_like_the_whole_decoder(prioritize_stream.PrioritizeStream, body, READS, expected)


def test_random_damage_with_kept_nodes_never_changes_a_result_or_an_error(sample):
    nodes = renamed(sample, 8)
    good = with_nodes(sample, nodes)
    for node in nodes:
        task = orjson.loads(sample)["task"]
        decode.decode_predicate(b'{"task":' + orjson.dumps(task) + b',"node":' + orjson.dumps(node) + b"}", READS)
    rng = random.Random(1723)
    for _ in range(300):
        body = bytearray(good)
        at = rng.randrange(len(body))
        body[at] = rng.choice(b'{}[],:"\\ 0a')
        body = bytes(body)
        try:
            expected = ("ok", node_reuse_off(lambda: whole_or_error(body)))
        except WireError as error:
            expected = ("error", str(error))
        buffer = bytearray(body)
        stream = prioritize_stream.PrioritizeStream(buffer, len(buffer), READS, piece_bytes=1, stream_from=0)
        arriving.feed_in_steps(stream, len(buffer), 500)
        try:
            got = ("ok", stream.finish())
        except WireError as error:
            got = ("error", str(error))
        assert got == expected, (at, chr(body[at]))
        assert buffer == body


def test_kept_nodes_of_another_read_set_are_not_taken(cluster_body):
    keep(Bodies(Cluster(CLUSTER)), range(40))
    buffer = bytearray(cluster_body)
    other = {"node": frozenset({("Name",)}), "task": frozenset({("Name",)})}
    stream = prioritize_stream.PrioritizeStream(buffer, len(buffer), other, piece_bytes=1 << 20, stream_from=0)
    arriving.feed_in_steps(stream, len(buffer), 1 << 20)
    task, nodes = stream.finish()
    assert stream.reused == 0 and stream.pieces > 0
    assert [n.Name for n in nodes] == [n.Name for n in whole(cluster_body)[1]]


def node_reuse_off(fn):
    saved = node_reuse._max_bytes
    node_reuse._max_bytes = 0
    try:
        return fn()
    finally:
        node_reuse._max_bytes = saved


def whole_or_error(body: bytes) -> tuple:
    request = decode.decode_prioritize(body, READS)
    return request.task.raw, [n.raw for n in request.nodes]


def test_invalid_utf8_in_a_node_fails_with_the_whole_decoders_error_at_its_byte(cluster_body):
    """msgspec raises ``UnicodeDecodeError`` for a string it decodes: a piece holding it stops the
    stream, and the answer is the whole decoder's 400 saying at which byte (it was a 500)."""
    at = cluster_body.index(b'"Name":"', len(cluster_body) // 2) + len(b'"Name":"')
    body = cluster_body[:at] + b"\xff" + cluster_body[at:]
    expected = error_of(lambda: decode.decode_prioritize(body, READS))
    assert f"invalid UTF-8 at byte {at}" in expected
    assert_fails_like_the_whole_decoder(prioritize_stream.PrioritizeStream, body, READS, expected)
