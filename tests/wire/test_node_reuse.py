"""A predicate body's node decoded once per content (``wire/node_reuse.py``): every body decodes to
exactly what the whole-body decoder gives, or fails with its error, whether the node was kept,
changed, malformed or in another layout; a node is decoded again as soon as one byte differs."""

from __future__ import annotations

import mmap
import random
import threading
from pathlib import Path

import msgspec
import orjson
import pytest

from bench.generate import Bodies, Cluster, ClusterSpec
from policy_extender.errors import WireError
from policy_extender.policyset.compile import compile_sources, load_directories
from policy_extender.wire import decode, node_reuse
from tests.support.forking import in_forked_child

ROOT = Path(__file__).resolve().parents[2]
READS = load_directories([ROOT / "bench" / "policies"]).reads
SAMPLE = orjson.loads((ROOT / "tests" / "samples" / "predicate.json").read_bytes())


@pytest.fixture(autouse=True)
def fresh():
    node_reuse.configure(node_reuse.DEFAULT_MAX_BYTES)
    yield
    node_reuse.configure(node_reuse.DEFAULT_MAX_BYTES)


def outcome(body, reads=READS) -> tuple:
    """What ``decode_predicate`` gives: the task and node as plain data, or the error's text."""
    try:
        request = decode.decode_predicate(body, reads)
    except WireError as error:
        return "error", str(error)
    return msgspec.to_builtins(request.task.raw), msgspec.to_builtins(request.node.raw)


def reuse_off(decoded, body, reads) -> tuple:
    """``decoded(body, reads)`` with node reuse off (the whole-body decoder), the kept nodes kept."""
    saved = node_reuse._max_bytes, node_reuse._kept
    node_reuse._max_bytes = 0
    try:
        return decoded(body, reads)
    finally:
        node_reuse._max_bytes, node_reuse._kept = saved


def whole(body, reads=READS) -> tuple:
    """The same body through the whole-body decoder (reuse off)."""
    return reuse_off(outcome, body, reads)


def charge(body) -> int:
    """What keeping the node of predicate ``body`` is charged against the bound."""
    return node_reuse._charge(reuse_off(decode.decode_predicate, body, READS).node.raw)  # type: ignore[attr-defined]  # a PredicateRequest


def body_of(task, node, tail: bytes = b"") -> bytes:
    """Go's layout: compact, ``task`` first."""
    return b'{"task":' + orjson.dumps(task) + b',"node":' + orjson.dumps(node) + tail + b"}"


def counted(fn) -> dict:
    before = dict(node_reuse.counts)
    fn()
    return {k: node_reuse.counts[k] - before[k] for k in before}


def test_a_node_sent_again_is_reused_and_equal_to_the_whole_decode():
    body = body_of(SAMPLE["task"], SAMPLE["node"])
    assert counted(lambda: outcome(body)) == {"reused": 0, "decoded": 1, "whole": 0}
    assert counted(lambda: outcome(body)) == {"reused": 1, "decoded": 0, "whole": 0}
    assert outcome(body) == whole(body)
    other_task = dict(SAMPLE["task"], Name="another-task")
    again = body_of(other_task, SAMPLE["node"])
    assert counted(lambda: outcome(again)) == {"reused": 1, "decoded": 0, "whole": 0}
    assert outcome(again) == whole(again) and outcome(again)[0]["Name"] == "another-task"


def test_a_changed_node_of_the_same_name_and_length_is_decoded_anew():
    node = SAMPLE["node"]
    idle = dict(node["Idle"], MilliCPU=1000.0)
    first = body_of(SAMPLE["task"], dict(node, Idle=idle))
    second = body_of(SAMPLE["task"], dict(node, Idle=dict(idle, MilliCPU=2000.0)))
    assert len(first) == len(second)
    assert outcome(first)[1]["Idle"]["MilliCPU"] == 1000.0
    assert counted(lambda: outcome(second)) == {"reused": 0, "decoded": 1, "whole": 0}
    assert outcome(second)[1]["Idle"]["MilliCPU"] == 2000.0
    assert outcome(second) == whole(second)
    assert outcome(first) == whole(first), "the replaced entry must not answer for the old bytes"


@pytest.mark.parametrize("case", [
    "nested node key in the task", "member after the node", "node key twice", "node first",
    "trailing whitespace", "leading whitespace", "spaces after the colon",
])
def test_other_layouts_give_the_whole_decoders_result(case):
    task, node = SAMPLE["task"], SAMPLE["node"]
    labels = dict(task["Pod"]["metadata"].get("labels") or {}, node="gpu-1")
    nested = dict(task, Pod=dict(task["Pod"], metadata=dict(task["Pod"]["metadata"], labels=labels)))
    other = dict(node, Idle=dict(node["Idle"], MilliCPU=1.0))
    body = {
        "nested node key in the task": body_of(nested, node),
        "member after the node": body_of(task, node, b',"extra":{"node":1}'),
        "node key twice": body_of(task, node, b',"node":' + orjson.dumps(other)),
        "node first": b'{"node":' + orjson.dumps(node) + b',"task":' + orjson.dumps(task) + b"}",
        "trailing whitespace": body_of(task, node) + b"\n \t",
        "leading whitespace": b" " + body_of(task, node),
        "spaces after the colon": body_of(task, node).replace(b'"node":', b'"node": ', 1),
    }[case]
    outcome(body_of(task, node))  # the node is kept: a wrong split would be answered from it
    assert outcome(body) == whole(body)
    assert outcome(body)[0] != "error"
    if case == "nested node key in the task":
        assert b',"node":"gpu-1"' in body and outcome(body)[0]["Name"] == task["Name"]
    if case == "node key twice":
        assert outcome(body)[1]["Idle"]["MilliCPU"] == 1.0, "the later key wins, as in the whole decode"


@pytest.mark.parametrize("damage", ["null node", "null task", "node not an object", "wrong type in a read field",
                                    "truncated", "extra closing brace", "unterminated string in the node"])
def test_damaged_bodies_fail_with_the_whole_decoders_error_and_keep_nothing(damage):
    task, node = SAMPLE["task"], SAMPLE["node"]
    good = body_of(task, node)
    body = {
        "null node": b'{"task":' + orjson.dumps(task) + b',"node":null}',
        "null task": b'{"task":null,"node":' + orjson.dumps(node) + b"}",
        "node not an object": b'{"task":' + orjson.dumps(task) + b',"node":[1,2]}',
        "wrong type in a read field": body_of(task, dict(node, Idle=dict(node["Idle"], MilliCPU="lots"))),
        "truncated": good[:-40],
        "extra closing brace": good + b"}",
        "unterminated string in the node": good.replace(b'"Name":"node-0000"', b'"Name":"node-0000', 1),
    }[damage]
    expected = whole(body)
    assert expected[0] == "error"
    before = node_reuse.kept_bytes()
    assert outcome(body) == expected
    assert outcome(good) == whole(good)  # the good one is kept; the damaged one did not replace it
    if damage in ("null node", "node not an object", "wrong type in a read field", "unterminated string in the node"):
        assert node_reuse.kept_bytes() == charge(good)
    assert node_reuse.kept_bytes() >= before


def test_random_damage_never_changes_a_result_or_an_error():
    """500 bodies, each the sample with one byte replaced, inserted or deleted at a random place,
    decoded after the undamaged body's node was kept: each is the whole decoder's outcome."""
    good = body_of(SAMPLE["task"], SAMPLE["node"])
    outcome(good)
    for body, damage in damaged(good, 500, seed=1616):
        assert outcome(body) == whole(body), damage
        assert outcome(good) == whole(good)


def damaged(good: bytes, count: int, seed: int):
    """``count`` copies of ``good``, each with one byte replaced, inserted or deleted at a random
    place (bytes that matter to JSON), with what was done."""
    rng = random.Random(seed)
    alphabet = b'{}[],:"\\ 0123456789.-eEtrufalsn'
    for _ in range(count):
        at = rng.randrange(len(good))
        kind = rng.choice(("replace", "insert", "delete"))
        byte = bytes([rng.choice(alphabet)])
        yield {"replace": good[:at] + byte + good[at + 1:], "insert": good[:at] + byte + good[at:],
               "delete": good[:at] + good[at + 1:]}[kind], (kind, at, byte)


def test_every_node_of_a_cluster_in_bytes_bytearray_and_mmap():
    bodies = Bodies(Cluster(ClusterSpec(nodes=12, pods_per_node=20)))
    for task in range(3):
        for node in range(12):
            body = bodies.predicate(node, 0, task)
            expected = whole(body)
            with mmap.mmap(-1, len(body)) as mapped:
                mapped[:] = body
                for form in (body, bytearray(body), mapped):
                    assert outcome(form) == expected
    assert node_reuse.counts["reused"] > 0


def test_a_read_set_change_decodes_the_node_with_the_new_fields():
    body = body_of(SAMPLE["task"], SAMPLE["node"])
    narrow = compile_sources({"a.policy": "filter node.name != \"x\"\n"}).reads
    wide = compile_sources({"b.policy": "filter node.labels.zone != \"x\"\n"}).reads
    assert "Node" not in outcome(body, narrow)[1]
    assert outcome(body, wide)[1]["Node"]["metadata"]["labels"] == SAMPLE["node"]["Node"]["metadata"]["labels"]
    assert outcome(body, narrow) == whole(body, narrow)
    assert outcome(body, wide) == whole(body, wide)


def test_a_full_bound_is_logged_once_with_what_to_raise(caplog):
    """The operator learns that nodes are decoded every time because the bound is full, once per
    worker (and again after a reconfiguration or a read-set change), not once per call."""
    bodies = Bodies(Cluster(ClusterSpec(nodes=10, pods_per_node=20)))
    some = [bodies.predicate(n, 0, 0) for n in range(10)]
    charges = [charge(body) for body in some]
    node_reuse.configure(sum(charges[:3]))
    with caplog.at_level("INFO", logger="policy_extender.wire"):
        for body in some + some:
            outcome(body)
        told = [r.getMessage() for r in caplog.records if r.name == "policy_extender.wire"]
        assert len(told) == 1, told
        assert f"node_reuse_bytes ({sum(charges[:3]) / (1 << 20):.1f} MiB) is full with 3 nodes" in told[0]
        assert f"({sum(charges[:3]) / 3e3:.1f} KB each)" in told[0] and "raise node_reuse_bytes" in told[0]
        assert "node-0003" in told[0], "the first node that did not fit"
        node_reuse.configure(charges[0])
        for body in some:
            outcome(body)
        assert len([r for r in caplog.records if r.name == "policy_extender.wire"]) == 2
        node_reuse.configure(node_reuse.DEFAULT_MAX_BYTES)
        for body in some:
            outcome(body)
        assert len([r for r in caplog.records if r.name == "policy_extender.wire"]) == 2, "nothing to tell"


def test_the_byte_bound_holds_and_nodes_beyond_it_are_still_decoded_right():
    bodies = Bodies(Cluster(ClusterSpec(nodes=10, pods_per_node=20)))
    some = [bodies.predicate(n, 0, 0) for n in range(10)]
    bound = 3 * max(charge(body) for body in some)
    node_reuse.configure(bound)
    for body in some + some:
        assert outcome(body) == whole(body)
    assert 0 < node_reuse.kept_bytes() <= bound and len(node_reuse._kept.nodes) == 3
    node_reuse.configure(0)
    assert counted(lambda: [outcome(b) for b in some]) == {"reused": 0, "decoded": 0, "whole": 10}
    assert node_reuse.kept_bytes() == 0


def test_threads_deciding_changing_nodes_at_once_each_get_their_own_bodys_node():
    """8 threads, 40 bodies each, over 5 node names whose bytes change (Idle differs per body):
    every result is the whole decoder's for that body."""
    node = SAMPLE["node"]
    bodies = [body_of(SAMPLE["task"], dict(node, Name=f"n{i % 5}", Idle=dict(node["Idle"], MilliCPU=float(i % 7))))
              for i in range(40)]
    expected = [whole(b) for b in bodies]
    failures: list = []

    def work(seed: int) -> None:
        order = list(range(40))
        random.Random(seed).shuffle(order)
        for i in order * 3:
            if outcome(bodies[i]) != expected[i]:
                failures.append(i)

    threads = [threading.Thread(target=work, args=(s,)) for s in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []


def test_the_service_default_is_the_modules_default():
    from policy_extender.config import Config
    assert Config().node_reuse_bytes == node_reuse.DEFAULT_MAX_BYTES


def test_nodes_unused_for_a_minute_make_room_for_new_ones(monkeypatch):
    """A full cache is not stuck with nodes that left the cluster: once they are unused for
    STALE_SECONDS a new node is kept in their place; nodes still asked about stay."""
    now = [1000.0]
    monkeypatch.setattr(node_reuse, "_clock", lambda: now[0])
    bodies = Bodies(Cluster(ClusterSpec(nodes=6, pods_per_node=20)))
    some = [bodies.predicate(n, 0, 0) for n in range(6)]
    node_reuse.configure(max(charge(b) for b in some) * 3)
    for body in some[:3]:
        outcome(body)
    now[0] += 30
    outcome(some[2])  # still asked about
    assert counted(lambda: outcome(some[3])) == {"reused": 0, "decoded": 1, "whole": 0}
    assert counted(lambda: outcome(some[3])) == {"reused": 0, "decoded": 1, "whole": 0}, "full: not kept"
    now[0] += node_reuse.STALE_SECONDS - 20  # nodes 0 and 1 unused for 70 s, node 2 for 40 s
    outcome(some[3])
    assert counted(lambda: outcome(some[3])) == {"reused": 1, "decoded": 0, "whole": 0}
    assert counted(lambda: outcome(some[2])) == {"reused": 1, "decoded": 0, "whole": 0}
    assert counted(lambda: outcome(some[0])) == {"reused": 0, "decoded": 1, "whole": 0}
    for body in some:
        assert outcome(body) == whole(body)


# ---------------------------------------------------------------- prioritize: the kept nodes read

PRIORITIZE = orjson.loads((ROOT / "tests" / "samples" / "prioritize.json").read_bytes())


def prioritize_outcome(body, reads=READS) -> tuple:
    try:
        request = decode.decode_prioritize(body, reads)
    except WireError as error:
        return "error", str(error)
    return msgspec.to_builtins(request.task.raw), [msgspec.to_builtins(n.raw) for n in request.nodes]


def prioritize_whole(body, reads=READS) -> tuple:
    return reuse_off(prioritize_outcome, body, reads)


def prioritize_body(task, nodes, tail: bytes = b"") -> bytes:
    return (b'{"task":' + orjson.dumps(task) + b',"nodes":['
            + b",".join(orjson.dumps(n) for n in nodes) + b"]" + tail + b"}")


def keep(nodes) -> None:
    """What the cycle's predicates leave: each node decoded (and kept) from a predicate body."""
    for node in nodes:
        outcome(body_of(SAMPLE["task"], node))


def test_prioritize_takes_the_nodes_predicates_kept_and_equals_the_whole_decode():
    bodies = Bodies(Cluster(ClusterSpec(nodes=12, pods_per_node=20)))
    for node in range(12):
        outcome(bodies.predicate(node, 0, 0))
    body = bodies.prioritize()
    assert prioritize_outcome(body) == prioritize_whole(body)
    prioritize_outcome(body)
    assert node_reuse.last_reused() == 12
    assert len(prioritize_outcome(body)[1]) == 12


def test_prioritize_decodes_the_nodes_that_changed_or_were_never_kept():
    nodes = PRIORITIZE["nodes"]
    keep(nodes[:2])
    changed = dict(nodes[0], Idle=dict(nodes[0]["Idle"], MilliCPU=1.0))
    body = prioritize_body(PRIORITIZE["task"], [changed, nodes[1], nodes[2]])
    assert prioritize_outcome(body) == prioritize_whole(body)
    assert prioritize_outcome(body)[1][0]["Idle"]["MilliCPU"] == 1.0
    assert node_reuse.last_reused() == 1, "only node 1 is kept with these bytes"


@pytest.mark.parametrize("case", [
    "null elements", "empty list", "null list", "member after the list", "nodes key twice",
    "nested nodes key in the task", "whitespace", "indented", "false entry start inside a node",
    "one node",
])
def test_prioritize_layouts_give_the_whole_decoders_result(case):
    task, nodes = PRIORITIZE["task"], PRIORITIZE["nodes"]
    keep(nodes)
    labels = dict(task["Pod"]["metadata"].get("labels") or {}, x="y")
    nested = dict(task, Pod=dict(task["Pod"], metadata=dict(task["Pod"]["metadata"], labels=labels)),
                  Extra={"a": 1, "nodes": [1]})
    fake = dict(nodes[1], Node=dict(nodes[1]["Node"], extra=[1, {"Name": "fake", "Node": 2}]))
    body = {
        "null elements": prioritize_body(task, nodes).replace(b'"nodes":[', b'"nodes":[null,', 1)[:-2] + b",null]}",
        "empty list": prioritize_body(task, []),
        "null list": b'{"task":' + orjson.dumps(task) + b',"nodes":null}',
        "member after the list": prioritize_body(task, nodes, b',"extra":1'),
        "nodes key twice": prioritize_body(task, nodes, b',"nodes":[' + orjson.dumps(nodes[2]) + b"]"),
        "nested nodes key in the task": prioritize_body(nested, nodes),
        "whitespace": prioritize_body(task, nodes) + b" \n",
        "indented": orjson.dumps(orjson.loads(prioritize_body(task, nodes)), option=orjson.OPT_INDENT_2),
        "false entry start inside a node": prioritize_body(task, [nodes[0], fake, nodes[2]]),
        "one node": prioritize_body(task, nodes[:1]),
    }[case]
    expected = prioritize_whole(body)
    assert expected[0] != "error"
    assert prioritize_outcome(body) == expected
    if case == "nodes key twice":
        assert len(expected[1]) == 1, "the later key wins, as in the whole decode"
    if case == "false entry start inside a node":
        assert b',{"Name":"fake","Node":' in body and len(expected[1]) == 3


def test_prioritize_random_damage_never_changes_a_result_or_an_error():
    nodes = [dict(n, Name=f"node-{i}") for i, n in enumerate(PRIORITIZE["nodes"] * 2)]
    good = prioritize_body(PRIORITIZE["task"], nodes)
    keep(nodes)
    for body, damage in damaged(good, 300, seed=1617):
        assert prioritize_outcome(body) == prioritize_whole(body), damage
    assert prioritize_outcome(good) == prioritize_whole(good)
    prioritize_outcome(good)
    assert node_reuse.last_reused() == len(nodes)


def test_prioritize_adds_nothing_to_the_kept_nodes():
    bodies = Bodies(Cluster(ClusterSpec(nodes=6, pods_per_node=20)))
    for node in range(4):
        outcome(bodies.predicate(node, 0, 0))
    before = node_reuse.kept_bytes()
    body = bodies.prioritize()
    assert prioritize_outcome(body) == prioritize_whole(body)
    prioritize_outcome(body)
    assert node_reuse.kept_bytes() == before and node_reuse.last_reused() == 4


def test_a_prioritize_of_few_kept_nodes_is_decoded_whole_after_two_alone(monkeypatch):
    """Decoding elements alone costs twice the whole decode's share (the search for each one's
    end), so the walk gives up once two more were decoded alone than were kept."""
    bodies = Bodies(Cluster(ClusterSpec(nodes=12, pods_per_node=20)))
    outcome(bodies.predicate(11, 0, 0))  # a kept node, the body's last
    searched = []
    real = node_reuse.node_start
    monkeypatch.setattr(node_reuse, "node_start", lambda *a: searched.append(a[1]) or real(*a))
    body = bodies.prioritize()
    expected = prioritize_whole(body)
    assert prioritize_outcome(body) == expected
    assert node_reuse.last_reused() == 0
    assert 2 <= len(searched) <= 6, "two elements decoded alone (each found by a search or two), then whole"


def test_a_walk_given_up_after_kept_nodes_reports_none_taken():
    """Kept nodes, then a separator the walk does not take (a space before the comma): the body
    is decoded whole, and the trace's count says no node was taken."""
    nodes = PRIORITIZE["nodes"]
    keep(nodes)
    compact = prioritize_body(PRIORITIZE["task"], nodes)
    first = orjson.dumps(nodes[0])
    body = compact.replace(first + b",", first + b" ,", 1)
    assert body != compact
    assert prioritize_outcome(body) == prioritize_whole(body)
    prioritize_outcome(body)
    assert node_reuse.last_reused() == 0
    prioritize_outcome(compact)
    assert node_reuse.last_reused() == len(nodes)


# ---------------------------------------------------------------- what is kept: a digest and the struct

PODS_READ = compile_sources({"p.policy": 'filter count(t for t in node.tasks if t.labels.team == "a") < 5\n'
                                         'score 10 * free_gpu\n'}).reads


@pytest.mark.parametrize("reads", [READS, PODS_READ], ids=["example policies", "policy reading every pod"])
def test_the_charge_covers_what_a_kept_node_holds(reads):
    """The bound counts at least the memory ``tracemalloc`` attributes to the kept nodes (structs,
    entries, digests), with the example policies and with a policy that reads every pod's labels
    (a struct ~10x larger)."""
    import gc
    import tracemalloc
    bodies = Bodies(Cluster(ClusterSpec(nodes=40, pods_per_node=30)))
    some = [bytes(bodies.predicate(n, 0, 0)) for n in range(40)]
    node_reuse.configure(1 << 34)
    outcome(some[0], reads)  # decoders built, read set current
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for body in some[1:]:
            outcome(body, reads)
        gc.collect()
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    charged = node_reuse.kept_bytes() * 39 / 40
    assert len(node_reuse._kept.nodes) == 40
    assert held <= charged, (held, charged)
    assert charged < 6 * held, "not wildly above either"
    assert node_reuse.kept_bytes() < sum(len(b) for b in some) / 3, "far less than the node bytes"


def test_a_body_is_not_held_after_its_node_is_kept():
    """Only a digest of the node's bytes is kept: the body reader's bytearray may be resized (no
    view of it is exported) and a mapped body closed, and the node is still reused after."""
    body = body_of(SAMPLE["task"], SAMPLE["node"])
    grown = bytearray(body)
    assert outcome(grown) == whole(body)
    grown.extend(b" ")  # BufferError if a view of it were kept
    with mmap.mmap(-1, len(body)) as mapped:
        mapped[:] = body
        assert outcome(mapped) == whole(body)
    assert counted(lambda: outcome(body)) == {"reused": 1, "decoded": 0, "whole": 0}


@pytest.mark.slow
def test_a_forked_worker_draws_its_own_seed_and_keeps_nothing_from_its_parent():
    outcome(body_of(SAMPLE["task"], SAMPLE["node"]))
    assert node_reuse._kept.nodes
    report = lambda: orjson.dumps([node_reuse._seed, len(node_reuse._kept.nodes)]).decode()  # noqa: E731
    child_seed, child_kept = orjson.loads(in_forked_child(report))
    assert child_seed != node_reuse._seed and child_kept == 0
