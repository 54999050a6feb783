"""A predicate body's node decoded once per content: the node's exact bytes -> its decoded struct.

Volcano's predicate body is ``{"task": TaskInfo, "node": NodeInfo}``, and within a cycle the same
NodeInfo is sent byte for byte with every task until an allocation changes it (Go's encoder is
deterministic). The node is almost the whole body (it embeds every pod on the node: 133 of 138 KB
at 20 pods), and decoding it is the one cost that grows with the body: msgspec must scan every
byte it skips. So a worker keeps, per node name, the length and a 128-bit digest of the node's
bytes and their decoded struct; a body whose node bytes have the same length and digest reuses the
struct, and only the task is decoded. The bytes themselves are not kept: a node of 30 pods is
~194 KB of JSON but ~2.3 KB decoded (the fields policies read), so a worker keeps every node of
a 500-node cluster in ~1.2 MB instead of ~97 MB.

The digest is XXH3-128 (``xxhash``: 3.8 us per 194 KB here, as fast as the memcmp it replaces
(2.9 us), where BLAKE3 takes 29 us and SHA-256 115 us), seeded per process with 64 random bits
drawn at import and again in each forked worker (``_reseed``). Two different node states of the
same name and length collide by accident with probability 2**-128. It is not a cryptographic
hash: someone who controls bytes of a node (a pod's annotations) and could learn a worker's seed,
which never leaves the process, could in principle build two states that collide; the worker
would then decide on that node's previous fields until its bytes change again.

Exactly the whole decoder's result, or the whole decoder runs. The split is taken only for
Volcano's layout: the body (trailing whitespace aside) starts ``{"task":`` and ends ``}``, and
its first ``,"node":`` splits it into ``{"task":…}`` and the node's value. A ``,"node":`` that is
not the top-level key (a nested key of the task) leaves unbalanced brackets in both parts, so
neither decodes; a second top-level member after the node leaves the node part with trailing
members, which does not decode either. Whenever a part does not decode, or the node is ``null``,
``split_decode`` returns None and the caller decodes the whole body as before: results and
errors are the whole decoder's. Structs are never written after decoding (the views only read
them), so one may serve many requests.

Bounds: the memory of one worker's kept nodes is at most ``max_bytes`` (``configure``; the service
sets ``node_reuse_bytes``, 0 turns it off), each node charged ``_charge``: four times its struct
encoded as JSON plus its entry, at least what ``tracemalloc`` attributes to it
(``tests/wire/test_node_reuse.py``). A kept node whose bytes changed is replaced. When a new
node does not fit, the nodes unused for ``STALE_SECONDS`` (gone from the cluster, or not asked
about for several cycles) are dropped, at most once per ``PURGE_EVERY`` seconds; if it still does
not fit it is not kept (it is decoded every time, as before), and the first time this happens
the worker logs it at INFO with what to raise. Evicting the least recently used
instead would keep nothing useful when a cycle's nodes exceed the bound: Volcano asks about them
in the same order for every task, so each would be evicted just before it is asked for again.
All of it is dropped when the read set changes (a policy version that reads other fields decodes
other structs).
"""

from __future__ import annotations

import logging
import os
import re
import threading
import time
from typing import Any

import msgspec
import xxhash

from .arriving import entry_start
from .reading import DECODE_ERRORS

_TASK_KEY = b'{"task":'
_NODE_KEY = b',"node":'
_NAME_KEY = b'{"Name":"'
_NODES_KEY = b',"nodes":['
#: where a node element of a prioritize list may start (the ``,`` before it): Go's field order
_NODE_ENTRY = re.compile(rb',\{"Name":"[^"\\]*","Node":')
_NODE_HEAD = b',{"Name":"'
_NODE_TAIL = b'","Node":'
_NAME_MAX = 512  # bytes of a node name looked at (Kubernetes names are at most 253)
_SPACE = b" \t\r\n"

DEFAULT_MAX_BYTES = 32 * 1024 * 1024
_ENTRY_BYTES = 256  # a kept entry beside its struct: the dict slot, name, list, digest, floats
_CHARGE_FACTOR = 4  # a decoded struct's memory per byte of its JSON (measured 2.7 with the entry)
STALE_SECONDS = 60.0
PURGE_EVERY = 10.0
_clock = time.monotonic
log = logging.getLogger("policy_extender.wire")


class _Kept:
    """The kept nodes of one read set: name -> [length, digest, decoded struct, last used, charge]."""

    __slots__ = ("frozen", "nodes", "size", "purged_at", "full_told")

    def __init__(self, frozen: Any) -> None:
        self.nodes: dict[bytes, list] = {}  # name: [length, digest, node, kept at, bytes]
        self.frozen, self.size, self.purged_at = frozen, 0, _clock()
        self.full_told = False  # the bound was met and logged (once per read set)


_lock = threading.Lock()
_thread = threading.local()
_max_bytes = DEFAULT_MAX_BYTES
_kept = _Kept(None)
#: Calls answered from a kept node / by decoding the node part (benchmarks and tests read these).
counts = {"reused": 0, "decoded": 0, "whole": 0}
_seed = 0
_encode = msgspec.json.Encoder().encode


def _reseed() -> None:
    """A new random seed, and nothing kept under the old one (at import, and in a forked child)."""
    global _seed, _kept
    _seed = int.from_bytes(os.urandom(8), "little")
    _kept = _Kept(None)


_reseed()
os.register_at_fork(after_in_child=_reseed)


def configure(max_bytes: int) -> None:
    """Cap the bytes kept by this process (0: keep nothing, every body is decoded whole)."""
    global _max_bytes, _kept
    with _lock:
        _max_bytes, _kept = max(0, int(max_bytes)), _Kept(None)


def enabled() -> bool:
    """Reuse is on (``node_reuse_bytes`` > 0): ``wire.open_stream`` keeps its jobs only then."""
    return _max_bytes > 0


def kept_bytes() -> int:
    """The memory charged for this worker's kept nodes (``_charge``)."""
    return _kept.size


def last_reused() -> int:
    """The nodes this thread's last ``split_decode`` / ``split_decode_nodes`` took from the kept
    ones (for the trace; a body then decoded whole counts 0)."""
    return getattr(_thread, "reused", 0)


def split_decode(body: Any, frozen: Any, task_decoder: msgspec.json.Decoder,
                 node_decoder: msgspec.json.Decoder) -> tuple[Any, Any] | None:
    """``(task struct, node struct)`` of a predicate ``body`` in Volcano's layout, the node a kept
    one when its bytes are; None when the whole body must be decoded instead."""
    _thread.reused = 0
    found = _layout(body, _NODE_KEY, b"}") if _max_bytes else None
    if found is None:
        _whole()
        return None
    split, end = found
    node = _node(body, split + len(_NODE_KEY), end - 1, frozen, node_decoder)
    task = _task(body, split, task_decoder) if node is not None else None
    if task is None:
        _whole()
        return None
    return task.task, node


def split_decode_nodes(body: Any, frozen: Any, task_decoder: msgspec.json.Decoder,
                       node_decoder: msgspec.json.Decoder) -> tuple[Any, list] | None:
    """``(task struct, node structs)`` of a prioritize ``body`` (``{"task": …, "nodes": […]}``)
    with the nodes this worker keeps taken from there; None when the whole body must be decoded.

    Prioritize only reads what predicates kept (the same nodes, sent before with each task); it
    adds nothing. The list is walked element by element from its start, which the task part's
    decode verifies (as for predicate): at each element start, a kept node whose bytes are equal
    and are followed by ``,`` or ``]`` is that element (a JSON value read from an element start
    ends where it ends); any other element is decoded alone up to the next possible entry start
    (``,{"Name":"…","Node":``), growing to the next one while it does not decode (a match inside
    a string). ``null`` elements are kept as None, as the whole decoder does. After the list only
    ``}`` may follow; anything else sends the body to the whole decoder, and so does a list of
    few kept nodes (``_walk``). An element is a kept node when its bytes from the element start,
    of the kept length, have the kept digest and are followed by ``,`` or ``]``.
    """
    kept = _kept
    _thread.reused = 0
    found = _layout(body, _NODES_KEY, b"]}") if _max_bytes and kept.nodes and kept.frozen == frozen else None
    task = _task(body, found[0], task_decoder) if found is not None else None
    if task is None:
        return None
    split, end = found  # type: ignore[misc]  # a task only from a found layout
    last = end - 2  # the list's "]", if nothing follows it but "}"
    walked = _walk(body, split + len(_NODES_KEY), last, kept, node_decoder)
    if walked is None:
        return None
    nodes, _thread.reused = walked
    return task.task, nodes


def _layout(body: Any, key: bytes, closing: bytes) -> tuple[int, int] | None:
    """Volcano's layout ``{"task":…<key>…<closing>`` (trailing whitespace aside): (where ``key``
    first is, where the body ends), or None."""
    if not _at(body, 0, _TASK_KEY):
        return None
    split = body.find(key, len(_TASK_KEY))
    end = len(body)
    while end and body[end - 1] in _SPACE:
        end -= 1
    if split < 0 or end < len(closing) or not _at(body, end - len(closing), closing):
        return None
    return split, end


def _task(body: Any, split: int, decoder: msgspec.json.Decoder) -> Any:
    """``{"task": …}`` up to ``split``, closed there; None when it does not decode (the split was
    not the top-level key)."""
    try:
        return decoder.decode(body[:split] + b"}")
    except DECODE_ERRORS:
        return None


def _walk(body: Any, pos: int, last: int, kept: _Kept, decoder: msgspec.json.Decoder) -> tuple[list, int] | None:
    """(the list's elements from ``pos``, how many were kept ones); None to decode the whole body
    instead: on anything unexpected, or once more elements had to be decoded alone than were kept
    plus one. An element decoded alone costs about twice its share of the whole decode (finding
    where it ends is a ``bytes.find`` over it, ~2 GB/s here), so a body of few kept nodes is
    cheaper whole."""
    nodes: list = []
    if pos == last:
        return nodes, 0  # "nodes":[]
    alone = reused = 0
    with memoryview(body) as view:
        while True:
            found = _kept_at(body, pos, last, kept)
            if found is not None:
                reused += 1
                value, after = found
            else:
                value, after = _element(body, view, pos, last, decoder)
                if after < 0:
                    return None
                alone += value is not None
                if alone > reused + 1:
                    return None
            nodes.append(value)
            if after == last:
                return nodes, reused
            if body[after] != 0x2C:  # ","
                return None
            pos = after + 1


def _element(body: Any, view: memoryview, pos: int, last: int,
             decoder: msgspec.json.Decoder) -> tuple[Any, int]:
    """(the element at ``pos``, not a kept one, the index after it), or (None, -1)."""
    if _at(body, pos, b"null"):
        return None, pos + 4
    search = pos + 1
    while True:
        found = node_start(body, search, last)
        stop = found if found >= 0 else last
        try:
            with view[pos:stop] as part:
                value = decoder.decode(part)
        except DECODE_ERRORS:
            if found < 0:
                return None, -1
            search = found + 1
            continue
        return (value, stop) if value is not None else (None, -1)


def kept_element(body: Any, pos: int, limit: int, frozen: Any) -> tuple[Any, int] | None:
    """(the kept node struct, the index after it) when the bytes at ``pos`` are a node this
    worker keeps for the read set ``frozen``, whole before ``limit``; else None. ``pos`` must be
    where a JSON value starts (the caller verified it): a value read from there ends where the
    kept node's bytes ended, since they were one whole JSON object."""
    kept = _kept
    if not kept.nodes or kept.frozen != frozen:
        return None
    return _kept_at(body, pos, limit, kept)


def _kept_at(body: Any, pos: int, limit: int, kept: _Kept) -> tuple[Any, int] | None:
    name = _name(body, pos)
    entry = kept.nodes.get(name) if name is not None else None
    if entry is None:
        return None
    end = pos + entry[0]
    if end > limit or digest(body, pos, end) != entry[1]:
        return None
    entry[3] = _clock()
    return entry[2], end


def node_start(buffer: Any, start: int, end: int) -> int:
    """Where the first possible node element in ``buffer[start:end]`` begins (its ``,``), or -1."""
    return entry_start(buffer, _NODE_ENTRY, _NODE_HEAD, _NODE_TAIL, start, end)


def _whole() -> None:
    counts["whole"] += 1
    _thread.reused = 0
    return None


def _node(body: Any, start: int, stop: int, frozen: Any, decoder: msgspec.json.Decoder) -> Any:
    kept = _kept if _kept.frozen == frozen else _reset(frozen)
    name = _name(body, start)
    entry = kept.nodes.get(name) if name is not None else None
    seen = None
    if entry is not None and entry[0] == stop - start:
        seen = digest(body, start, stop)
        if seen == entry[1]:
            counts["reused"] += 1
            _thread.reused = 1
            entry[3] = _clock()
            return entry[2]
    try:
        with memoryview(body) as whole, whole[start:stop] as part:
            node = decoder.decode(part)
    except DECODE_ERRORS:
        return None
    if node is not None and name is not None:
        _keep(kept, name, stop - start, seen or digest(body, start, stop), node)
    counts["decoded"] += 1
    return node


def digest(body: Any, start: int, stop: int) -> bytes:
    """XXH3-128 of ``body[start:stop]`` under this process's seed, without a copy (bytes,
    bytearray or a mapped body; the views are released at once, so a bytearray may be resized and
    a map closed after)."""
    with memoryview(body) as whole, whole[start:stop] as part:
        return xxhash.xxh3_128_digest(part, _seed)


def _charge(node: Any) -> int:
    """The memory a kept node is charged: four times its struct encoded as JSON, plus its entry
    (a node of 30 pods with the example policies: 857 bytes encoded, ~2.3 KB measured, charged
    3.7 KB)."""
    return _CHARGE_FACTOR * len(_encode(node)) + _ENTRY_BYTES


def _at(body: Any, start: int, expected: bytes) -> bool:
    """The body's bytes from ``start`` are ``expected`` (bytes or a view) with no copy: a memcmp
    for bytes and bytearray; for an mmap (no ``startswith``), a ``find`` confined to the one
    place, as fast (12 ms per 100 MB here; ``==`` on a memoryview compares element by element,
    100x slower, and a copy first costs 1.5x)."""
    startswith = getattr(body, "startswith", None)
    if startswith is not None:
        return startswith(expected, start)
    return body.find(expected, start, start + len(expected)) == start


def _name(body: Any, start: int) -> bytes | None:
    """The node's ``Name`` when it is the node object's first member (Go's field order), plain."""
    if not _at(body, start, _NAME_KEY):
        return None
    first = start + len(_NAME_KEY)
    quote = body.find(b'"', first, first + _NAME_MAX)
    if quote < 0:
        return None
    name = bytes(body[first:quote])
    return None if b"\\" in name else name


def _reset(frozen: Any) -> _Kept:
    global _kept
    with _lock:
        if _kept.frozen != frozen:
            _kept = _Kept(frozen)
        return _kept


def _keep(kept: _Kept, name: bytes, length: int, digest: bytes, node: Any) -> None:
    charge = _charge(node)
    with _lock:
        if kept is not _kept:
            return
        old = kept.nodes.get(name)
        size = kept.size - (old[4] if old else 0) + charge
        if size > _max_bytes and old is None:
            size -= _purge(kept)
        if size <= _max_bytes:
            kept.nodes[name] = [length, digest, node, _clock(), charge]
            kept.size = size
        elif not kept.full_told:
            kept.full_told = True
            each = kept.size / max(1, len(kept.nodes))
            log.info("node_reuse_bytes (%.1f MiB) is full with %d nodes charged %.1f MiB (%.1f KB each): node %s and "
                     "others not kept are decoded from their bytes on every call; raise node_reuse_bytes to "
                     "about %.1f KB per node to keep every node (docs/operations.md, Sizing)",
                     _max_bytes / (1 << 20), len(kept.nodes), kept.size / (1 << 20), each / 1e3,
                     name.decode(errors="replace"), each / 1e3)


def _purge(kept: _Kept) -> int:
    """Drop the nodes unused for ``STALE_SECONDS`` (at most once per ``PURGE_EVERY``); the bytes freed."""
    now = _clock()
    if now - kept.purged_at < PURGE_EVERY:
        return 0
    kept.purged_at = now
    stale = [name for name, entry in kept.nodes.items() if now - entry[3] >= STALE_SECONDS]
    freed = sum(kept.nodes.pop(name)[4] for name in stale)
    kept.size -= freed
    return freed
