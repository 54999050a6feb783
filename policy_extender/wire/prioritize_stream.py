"""Decoding a prioritize body while it arrives, piece by piece, to the same result as
``decode.decode_prioritize``'s whole-body decode.

A prioritize body carries every candidate node whole, each with all its pods (97 MB for 500
nodes of 30 pods), and msgspec must scan every byte even of the pods it skips (~1.3 GB/s here):
decoding only after the last byte nearly doubles the call. Volcano's body is Go's
``encoding/json`` of ``{"task": TaskInfo, "nodes": [NodeInfo]}``: compact, fields in struct
order, so a node entry starts ``,{"Name":"<name>","Node":``. ``PrioritizeStream.feed`` (called
as bytes arrive) finds such entry starts and decodes the run of whole entries before one as a
list of its own (``[`` and ``]`` written over the separators for the call, then put back).

Why the result is exactly the whole-body decode's (the argument of ``wire.open_stream``, for a
list):

* the list's start is known: the body starts ``{"task":{``, and the first ``},"nodes":[`` after
  it is taken only when ``{"task":...}`` up to its ``}`` decodes as a JSON object (the ``,``
  after it written ``}`` for the check): the task object closed there, so ``"nodes":[`` is the
  top-level key and its list begins. Any other start, or a check that fails, streams nothing;
* each piece starts where the previous verified piece ended, so it begins outside any string,
  at an element of that list; a piece that decodes as a list is a run of whole elements (a split
  inside a string or a nested object leaves it open and fails);
* what no piece covered (the task, the last elements, anything after the list) is decoded at
  ``finish`` from the body with the covered elements cut out and one sentinel element (a random
  63-bit integer) in their place, by a decoder that accepts an integer element. The pieces'
  nodes go where the sentinel is; if a later ``"nodes"`` key replaced that list (the sentinel is
  gone), the pieces are dropped, as the whole decode drops that list; an integer element
  anywhere else (which the whole decoder refuses) sends the body to the whole decoder;
* any piece that does not decode (a malformed body, an entry start matched where it is not one)
  stops the pieces, and ``finish`` decodes the whole body with the whole decoder: the answer, and
  any error with its JSON path, are then the whole decoder's by construction.

Nodes this worker kept from the task's predicates (``wire.node_reuse``) are not decoded: at each
verified element start, an element whose bytes have a kept node's length and digest and are
followed by ``,`` is that node (one whole JSON object read from an element start ends where its
bytes end), and the next element starts after the ``,``: the same argument as a piece's, with a
digest (XXH3-128, as fast as a memcmp) in place of the decode. The other elements are decoded in pieces between them.

The buffer must be writable (the separators are rewritten for the duration of one decode call)
and nothing else may read the bytes being decoded meanwhile; it is left as it arrived.
"""

from __future__ import annotations

import random
import time
from typing import Any

import msgspec

from . import arriving
from .decode import prioritize_body_decoder
from .node_reuse import kept_element, node_start
from .reading import DECODE_ERRORS, FrozenReads, Reads, built_once, decode_json, freeze_reads, struct_of

#: decode once this much more has arrived (one decode call holds the GIL ~1 ms per 1.3 MB)
PIECE_BYTES = 2 << 20
#: bodies smaller than this are decoded whole: below it the receiving thread and its hand-offs
#: cost what the overlap saves (served, one call at a time, 30 pods/node: 5.8 MB 9 ms streamed
#: vs 8 ms whole, 9.7 MB 14 vs 13, 19 MB 27 vs 28, 39 MB 47 vs 53, 97 MB 106-117 vs 127-138)
STREAM_FROM = 24 << 20

_TASK_START = b'{"task":{'
_NODES_START = b'},"nodes":['
#: an entry start is looked for again this far back (a start cut by the end of what had arrived)
_OVERLAP = 4096
#: the task object is looked for this far: a larger one is decoded whole
_TASK_BYTES = 1 << 20

_TASK, _NODES, _OFF = "task", "nodes", "off"


class _Anything(msgspec.Struct, forbid_unknown_fields=False):
    """Any JSON object, checked and skipped (the task prefix's check)."""


_CHECK_OBJECT = msgspec.json.Decoder(_Anything)


@built_once
def _decoders(frozen: FrozenReads) -> tuple[msgspec.json.Decoder, msgspec.json.Decoder]:
    """(a piece: a list of nodes, the skeleton: the body whose node list may hold an integer)."""
    node = struct_of(frozen, "node")
    skeleton = msgspec.defstruct("PrioritizeSkeleton", [
        ("task", struct_of(frozen, "task") | None, None),
        ("nodes", list[node | None | int] | None, None)], forbid_unknown_fields=False)  # type: ignore[valid-type]  # a Struct built at run time
    return msgspec.json.Decoder(list[node | None]), msgspec.json.Decoder(skeleton)  # type: ignore[valid-type]  # as above


class PrioritizeStream:
    """One prioritize body of ``length`` bytes arriving into ``buffer`` (see the module doc)."""

    verb = "prioritize"

    def __init__(self, buffer: Any, length: int, reads: Reads | None = None,
                 piece_bytes: int = PIECE_BYTES, stream_from: int | None = None) -> None:
        self.buffer, self.length, self.piece_bytes = buffer, length, piece_bytes
        self.frozen = freeze_reads(reads)
        self.piece_decoder, self.skeleton_decoder = _decoders(self.frozen)
        self.state = _TASK if length >= (STREAM_FROM if stream_from is None else stream_from) else _OFF
        self.first = 0          # the first element of the node list
        self.pos = 0            # start of the next element (verified)
        self.search_from = 0    # where to look for the next entry start (or the list's start)
        self.nodes: list = []   # the pieces' nodes, in order
        self.pieces = 0
        self.reused = 0         # elements taken from the nodes this worker kept (not decoded)
        self.alone = 0          # pieces of one element, decoded between kept ones
        self.misses = 0         # of those, since the last node taken kept
        self.busy = 0.0         # seconds spent decoding pieces

    def feed(self, received: int) -> bool:
        """``received`` bytes of the body have arrived: decode one piece of whole elements among
        them if there is one; False when there is nothing to do until more arrived."""
        if self.state == _NODES:
            return self._step(received)
        if self.state == _TASK:
            return self._find_nodes(received)
        return False

    def _find_nodes(self, received: int) -> bool:
        buffer = self.buffer
        if received < len(_TASK_START):
            return False
        if buffer[:len(_TASK_START)] != _TASK_START:
            self.state = _OFF
            return False
        at = buffer.find(_NODES_START, max(len(_TASK_START) - 1, self.search_from), received)
        if at < 0:
            self.search_from = max(0, received - len(_NODES_START))
            if received >= min(self.length, _TASK_BYTES):
                self.state = _OFF
            return False
        comma = at + 1
        buffer[comma] = 0x7D  # "}": does {"task":...} close right there?
        try:
            with memoryview(buffer) as view, view[:comma + 1] as head:
                _CHECK_OBJECT.decode(head)
        except DECODE_ERRORS:
            self.state = _OFF
            return False
        finally:
            buffer[comma] = 0x2C  # ","
        self.first = self.pos = self.search_from = at + len(_NODES_START)
        self.state = _NODES
        return True

    @property
    def covered(self) -> bool:
        """Some of the list was decoded or taken before the last byte."""
        return bool(self.pieces or self.reused)

    def _step(self, received: int) -> bool:
        """Take the kept nodes at the list's next element, else decode one piece of the node
        list if an entry start lies ``piece_bytes`` past the piece's start; False when waiting
        for bytes. Right after a node taken kept, the next element is decoded alone, and the one
        after it too, so that a piece does not decode the kept nodes after them; after two in a
        row not kept, pieces are ``piece_bytes`` again until a node is taken (deciding an element
        alone costs a search over it: a body whose kept nodes all come first, as when the bound
        let a worker keep only the cycle's first nodes, pays it twice, not once per node). No
        byte is searched twice but the overlap."""
        if self._take_kept(received):
            self.misses = 0
            return True
        pos, piece = self.pos, self.piece_bytes
        if self.reused and self.misses < 2:
            piece = 1
        start = max(self.search_from, pos + piece - min(_OVERLAP, piece // 2))
        if start >= received:
            return False
        stop = node_start(self.buffer, start, received)
        if stop < 0:
            self.search_from = max(start, received - _OVERLAP)
            return False
        if piece == 1:
            self.alone += 1
            self.misses += 1
        return self._piece(stop)

    def _take_kept(self, received: int) -> bool:
        """Take the elements from ``pos`` on whose bytes are a node this worker kept
        (``wire.node_reuse``: the same length and digest), each followed by ``,`` (the list's last
        element is left to ``finish``): the same structs the pieces would decode, by a digest
        instead of a scan."""
        buffer, took = self.buffer, False
        while True:
            found = kept_element(buffer, self.pos, received - 1, self.frozen)
            if found is None or buffer[found[1]] != 0x2C:  # ","
                return took
            self.nodes.append(found[0])
            self.pos = self.search_from = found[1] + 1
            self.reused += 1
            took = True

    def _piece(self, stop: int) -> bool:
        """Decode ``buffer[pos:stop]`` as elements of the list; ``stop`` is the ``,`` before the
        next element. One that does not decode stops the stream."""
        buffer, begin = self.buffer, self.pos
        before = buffer[begin - 1]
        buffer[begin - 1], buffer[stop] = 0x5B, 0x5D  # "[", "]"
        started = time.perf_counter()
        try:
            with memoryview(buffer) as view, view[begin - 1:stop + 1] as piece:
                decoded = self.piece_decoder.decode(piece)
        except DECODE_ERRORS:
            self.state = _OFF
            return False
        finally:
            buffer[begin - 1], buffer[stop] = before, 0x2C
            self.busy += time.perf_counter() - started
        self.pieces += 1
        self.nodes.extend(decoded)
        self.pos = self.search_from = stop + 1
        return True

    def finish(self) -> tuple[Any, list | None]:
        """(task, nodes) as the whole decoder reads them (``nodes`` may hold None elements, or be
        None) once every byte arrived; raises ``WireError`` exactly as the whole decoder does."""
        while self.feed(self.length):
            pass
        if self.state == _OFF or not self.covered:
            return self._whole()
        sentinel = random.getrandbits(62) + (1 << 62)
        covered = self.pos - 1  # the "," after the last piece's last element
        skeleton = bytearray(self.buffer[:self.first])
        skeleton += b"%d" % sentinel
        skeleton += self.buffer[covered:self.length]
        try:
            decoded = self.skeleton_decoder.decode(skeleton)
        except DECODE_ERRORS:
            return self._whole()  # the whole decoder's error, path and all
        nodes = rest = decoded.nodes
        if nodes and type(nodes[0]) is int and nodes[0] == sentinel:
            rest = nodes[1:]
            nodes = self.nodes + rest
        # else a later "nodes" key replaced the list the pieces came from: they are dropped
        if rest and any(type(node) is int for node in rest):
            return self._whole()  # an integer element: the whole decoder's error
        return decoded.task, nodes

    def _whole(self) -> tuple[Any, list | None]:
        self.state = _OFF
        decoded = decode_json(prioritize_body_decoder(self.frozen), self.buffer)
        return decoded.task, decoded.nodes


def decode_streamed(body: Any, reads: Reads | None = None, step: int = PIECE_BYTES,
                    piece_bytes: int = PIECE_BYTES) -> tuple[Any, list | None]:
    """The whole body through ``PrioritizeStream`` as if it had arrived ``step`` bytes at a time,
    in pieces of ``piece_bytes`` and more (tests and benchmarks); ``body`` must be writable."""
    stream = PrioritizeStream(body, len(body), reads, piece_bytes=piece_bytes, stream_from=0)
    arriving.feed_in_steps(stream, len(body), step)
    return stream.finish()
