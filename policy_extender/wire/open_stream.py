"""Decoding an onSessionOpen body while it arrives, piece by piece, to the same result as
``snapshot.decode_open_body`` of the whole body.

A 268 MB snapshot takes about as long to decode (msgspec must scan every byte, ~1.3 GB/s here)
as to receive; decoding the whole body only after its last byte doubles the open. Volcano's body
is Go's ``encoding/json`` of ``{"Jobs":{uid: JobInfo}, "Nodes":{name: NodeInfo}, "Queues":...}``:
compact, fields in struct order, so a job entry starts ``,"<uid>":{"UID":"<uid>","PgUID":`` and a
node entry ``,"<name>":{"Name":"<name>","Node":``. ``OpenStream.feed`` (called as bytes arrive)
finds such entry starts in what has arrived and decodes the run of whole entries before one as
a map of its own (``{`` and ``}`` written over the separators for the call, then put back); the
Jobs entries are kept (pruned, as the whole-body decoder keeps them), the Nodes entries are only
checked, as there.

Why the result is exactly the whole-body decode's:

* a piece starts where the previous verified piece ended (the first right after ``{"Jobs":{``),
  so the JSON state there is known: outside any string, expecting a key of that map. A piece
  that decodes as an object is then a run of whole ``key: value`` entries of that map: a split
  inside a string or inside a nested object leaves a string or a bracket open and fails;
* the map's end (``},"Nodes":{`` after Jobs, ``},"Queues":`` after Nodes) is verified the same
  way: the piece before it decodes only when that ``}`` closes the map;
* what no piece covered (the top level, the last entries, Queues, ...) is decoded by the whole
  decoder from the body with the covered entries cut out and a sentinel entry (a random key,
  value null) put in their place. Entries removed from an object of entries leave a valid
  document exactly when the whole one was valid; the Jobs pieces (dict order kept, a repeated key
  keeps its first place and its last value, as msgspec decodes it) go before the sentinel's map's
  own entries, and if a later ``"Jobs"`` key replaced that map (the sentinel is gone) the pieces
  are dropped, as the whole decode drops that map;
* any piece that does not decode (a malformed body, or an entry start matched where it is not
  one) stops the pieces, and ``finish`` decodes the whole body with the whole decoder: the
  answer, and any error with its JSON path, are then the whole decoder's by construction.

Nodes this worker kept from predicate bodies (``wire.node_reuse``: Volcano encodes the same
``NodeInfo`` in both, so a node unchanged since the last cycle's predicates has the same bytes)
are not decoded again: at a verified entry start of the Nodes map, an entry ``"<key>":<value>``
whose value has a kept node's length and digest, whose key is that node's name (so a valid
string) and which is followed by ``,`` is a whole valid entry (the node's bytes decoded before),
and the next entry starts after the ``,``: the same argument as a piece's, with a digest in place
of the check. Followed by the map's end marker instead (``},"Queues":``, ``},"Nodes":{`` for
the Jobs), it is the map's last entry and the map ends there, as after a piece that closes it. Right after a kept entry, the next one is checked alone (so that a piece does not
check the kept entries after it), and the one after it too; after two in a row not kept, pieces
are ``piece_bytes`` again until an entry is taken.

Jobs this worker decoded in its last onSessionOpen are not decoded again either: each job entry
is decoded alone (from a verified entry start to the next entry start, so one piece per job) and
kept by its key with its value's length and digest (``_KeptJobs``); at a verified entry start of
the next open, an entry ``"<uid>":<value>`` with a plain key whose value has the kept length and
digest and is followed by ``,`` (or the map's end marker) is that job's pruned struct, put in the
map as a piece's entry is. Any piece of one job under a plain key is kept, the map's last too.
The kept jobs are replaced by those of each open that decodes (one snapshot's pruned jobs per
worker at most), and dropped when the read set changes; ``node_reuse_bytes`` 0 turns this off
too (the Jobs map is then decoded in ``piece_bytes`` pieces, as before). With 2 workers, a worker's last open is
at most a few cycles old; a job whose bytes changed since is decoded again.

A body in another shape (another field order, whitespace) is never split: ``finish`` then
decodes it whole, as before. The buffer must be writable (the separators are rewritten for
the duration of one decode call) and nothing else may read the bytes being decoded meanwhile;
it is left as it arrived.
"""

from __future__ import annotations

import os
import re
import time
from typing import Any

import msgspec

from . import arriving
from . import node_reuse
from .node_reuse import digest, kept_element
from .reading import DECODE_ERRORS, FrozenReads, Reads, built_once, decode_json, freeze_reads, struct_of
from .snapshot import node_keys, node_struct, open_body_decoder

#: decode once this much more has arrived (one decode call holds the GIL ~1 ms per 1.3 MB)
PIECE_BYTES = 2 << 20
#: bodies smaller than this are decoded whole (nothing to overlap)
STREAM_FROM = 4 << 20

_JOBS_START = b'{"Jobs":{'
_JOB_ENTRY = re.compile(rb',"[^"\\]*":\{"UID":"[^"\\]*","PgUID":')
_JOB_TAIL = b'","PgUID":'
#: a job value's ``"Queue":`` follows its UID, PgUID, Name and Namespace (Go's field order); its
#: ``Q`` is rare in Volcano's JSON, so a job entry is found by a memchr for it (~10 GB/s here),
#: where ``bytes.find`` of the tail runs at ~1.4 GB/s
_JOB_QUEUE = b'"Queue":'
#: no job start in this much after a job's start: the map's end (or a long job) is looked for by
#: the pieces (searching each job for the end marker too would cost a ``bytes.find`` over all)
_LONG_JOB = 1 << 20
_QUEUE_AFTER_TAIL = 1024  # how far before its "Queue" a job's PgUID may be (names are < 320 bytes)
_JOBS_END = b'},"Nodes":{'
_NODE_ENTRY = re.compile(rb',"[^"\\]*":\{"Name":"[^"\\]*","Node":')
_NODE_TAIL = b'","Node":'
_NODES_END = b'},"Queues":'
_NAME_AT = len(b'{"Name":"')  # where a node's name starts in its value
_KEY_MAX = 512  # bytes of an entry's key looked at (Kubernetes names are at most 253)
#: a key taken with a kept node: printable ASCII, no quote or backslash (a valid JSON string as is)
_PLAIN_KEY = re.compile(rb'[\x20\x21\x23-\x5b\x5d-\x7e]*')
#: an entry start is looked for again this far back (a start cut by the end of what had arrived)
_OVERLAP = 4096

_JOBS, _NODES, _DONE, _OFF = "jobs", "nodes", "done", "off"


class _KeptJobs:
    """The jobs of this worker's last decoded onSessionOpen for one read set: key -> (value's
    length, digest, pruned struct)."""

    __slots__ = ("frozen", "entries")

    def __init__(self, frozen: Any, entries: dict) -> None:
        self.frozen, self.entries = frozen, entries


_kept_jobs = _KeptJobs(None, {})


def _forget_jobs() -> None:
    global _kept_jobs
    _kept_jobs = _KeptJobs(None, {})


os.register_at_fork(after_in_child=_forget_jobs)  # digests are under the parent's seed


@built_once
def _piece_decoders(frozen: FrozenReads) -> tuple[msgspec.json.Decoder, msgspec.json.Decoder]:
    job, node = struct_of(frozen, "job"), node_struct(frozen)
    return (msgspec.json.Decoder(dict[str, job | None]), msgspec.json.Decoder(dict[str, node | None]))  # type: ignore[valid-type]  # a Struct built at run time


class OpenStream:
    """One onSessionOpen body of ``length`` bytes arriving into ``buffer`` (see the module doc)."""

    def __init__(self, buffer: Any, length: int, reads: Reads | None = None,
                 piece_bytes: int = PIECE_BYTES, stream_from: int | None = None) -> None:
        self.buffer, self.length, self.piece_bytes = buffer, length, piece_bytes
        self.frozen = freeze_reads(reads)
        self.jobs_decoder, self.nodes_decoder = _piece_decoders(self.frozen)
        self.state = _OFF
        self.pos = 0            # start of the next entry of the current map (verified)
        self.search_from = 0    # where to look for the next entry start
        self.end_from = 0       # where to look for the map's end marker
        self.jobs: dict = {}    # the Jobs pieces, merged in order
        #: the Nodes pieces and kept nodes, merged in order, when the snapshot keeps nodes
        self.nodes: dict | None = {} if node_keys(self.frozen) is not None else None
        self.jobs_span = self.nodes_span = (0, 0)   # (first entry, first byte not covered)
        self.pieces = 0
        self.reused = 0         # Nodes entries taken as kept nodes (not checked again)
        self.jobs_reused = 0    # Jobs entries taken as kept jobs (not decoded again)
        kept = _kept_jobs
        self.keeps = node_reuse.enabled()  # node_reuse_bytes 0 turns this off too
        self.kept_jobs = kept.entries if kept.frozen == self.frozen and self.keeps else {}
        self.new_jobs: dict = {}  # this open's jobs by key, kept for the next one if it decodes
        self.misses = 0         # entries checked alone in a row since the last kept one
        self.busy = 0.0         # seconds spent decoding pieces and taking kept nodes
        if length >= (STREAM_FROM if stream_from is None else stream_from):
            self._arm()

    def _arm(self) -> None:
        """Streams only bodies that start as Volcano's do (checked once the start arrived)."""
        self.state = _JOBS
        self.pos = self.search_from = self.end_from = len(_JOBS_START)
        self.jobs_span = (self.pos, self.pos)

    def feed(self, received: int) -> bool:
        """``received`` bytes of the body have arrived: decode one piece of whole entries among
        them if there is one; False when there is nothing to do until more arrived."""
        state = self.state
        if state in (_DONE, _OFF) or received < len(_JOBS_START):
            return False
        if self.pieces == 0 and self.pos == len(_JOBS_START) and \
                self.buffer[:len(_JOBS_START)] != _JOBS_START:
            self.state = _OFF
            return False
        return self._step(received)

    def _step(self, received: int) -> bool:
        """Decode one piece of the current map if one is there; False when waiting for bytes.

        Entry starts are looked for from ``piece_bytes`` past the piece's start, in a window
        that grows only while no entry start is found (a long entry), so no byte is searched
        twice; the map's end marker only where the window found none (``bytes.find`` of it runs
        at ~1 GB/s on JSON) or a piece did not decode."""
        jobs = self.state == _JOBS
        alone = (self._jobs_alone(received) if self.keeps else None) if jobs else self._nodes_alone(received)
        if alone is not None:
            return alone
        entry, tail, end_marker = ((_JOB_ENTRY, _JOB_TAIL, _JOBS_END) if jobs
                                   else (_NODE_ENTRY, _NODE_TAIL, _NODES_END))
        pos, piece = self.pos, self.piece_bytes
        overlap = min(_OVERLAP, piece // 2)  # < piece: each window starts past the last one
        window_end = min(received, max(pos + 2 * piece, self.search_from + piece))
        start = max(self.search_from, pos + piece - overlap)
        if start < window_end:
            stop = arriving.entry_start(self.buffer, entry, b',"', tail, start, window_end)
            if stop >= 0:
                if self._piece(stop, closes=False):
                    return True
                end = self.buffer.find(end_marker, pos, stop + 1)  # the map ended before it?
                if end < 0:
                    self.state = _OFF
                    return False
                return self._piece(end, closes=True, last_try=True)
            self.search_from = max(start, window_end - overlap)
        if window_end - pos < 2 * piece and received < self.length:
            return False  # an entry start may still come: wait for more
        end = self.buffer.find(end_marker, max(pos, self.end_from), window_end)
        self.end_from = max(pos, window_end - len(end_marker) + 1)
        if end >= 0:
            return self._piece(end, closes=True, last_try=True)
        return window_end < received  # a long entry: the window moves on

    def _jobs_alone(self, received: int) -> bool | None:
        """Take the kept jobs at ``pos``, else decode the entry there alone and keep it; None to
        go on with pieces (a key that is not plain, an entry start matched inside a string, the
        map's last entry)."""
        if self._take_kept(received, self._kept_job, self._took_job):
            return True
        start = max(self.search_from, self.pos + 1)
        stop = _job_start(self.buffer, start, received) if start < received else -1
        if stop < 0:
            if received == self.length or received - self.pos >= max(_LONG_JOB, 2 * self.piece_bytes):
                return None  # the map's last job (or a long one): the pieces look for the map's end
            self.search_from = max(start, received - _OVERLAP)
            return False
        return True if self._piece(stop, closes=False) else None

    def _plain_key(self, received: int) -> bytes | None:
        """The key of the entry at ``pos`` when it is plain (a valid JSON string as is) and
        followed by ``:``, else None."""
        buffer, pos = self.buffer, self.pos
        if pos >= received or buffer[pos] != 0x22:  # '"'
            return None
        quote = buffer.find(b'"', pos + 1, min(received, pos + 1 + _KEY_MAX))
        if quote < 0 or quote + 1 >= received or buffer[quote + 1] != 0x3A:  # ":"
            return None
        key = bytes(buffer[pos + 1:quote])
        return key if _PLAIN_KEY.fullmatch(key) else None

    def _take_kept(self, received: int, kept_at, took_one) -> bool:
        """Take the entries of the current map from ``pos`` on that ``kept_at(key, value,
        received)`` finds kept (``(end, what)``: the entry's value ends at ``end``), each followed by
        ``,`` or, the last, by the map's end marker; ``took_one(key, what)`` records each."""
        started, took = time.perf_counter(), False
        try:
            while True:
                key = self._plain_key(received)
                found = kept_at(key, self.pos + len(key) + 3, received) if key is not None else None
                closes = self._closes(found[0], received) if found is not None else None
                if closes is None:
                    return took
                took_one(key, found[1])  # type: ignore[index]  # closes is only set from a found
                self._taken(found[0], closes)  # type: ignore[index]  # as above
                took = True
                if closes:
                    return took
        finally:
            self.busy += time.perf_counter() - started

    def _kept_job(self, key: bytes, value: int, received: int) -> tuple[int, tuple] | None:
        """A job kept from this worker's last open under ``key`` whose value at ``value`` has the
        kept length and digest: (where the value ends, the kept entry)."""
        entry = self.kept_jobs.get(key.decode())
        if entry is None:
            return None
        end = value + entry[0]
        if end >= received or digest(self.buffer, value, end) != entry[1]:
            return None
        return end, entry

    def _took_job(self, key: bytes, entry: tuple) -> None:
        name = key.decode()
        self.jobs[name] = entry[2]
        self.new_jobs[name] = entry
        self.jobs_reused += 1

    def _closes(self, end: int, received: int) -> bool | None:
        """After an entry ending at ``end``: False for ``,`` (another entry follows), True for the
        current map's end marker (``},"Nodes":{`` or ``},"Queues":``), None for anything else or
        not arrived yet."""
        if end >= received:
            return None
        if self.buffer[end] == 0x2C:  # ","
            return False
        marker = _JOBS_END if self.state == _JOBS else _NODES_END
        if end + len(marker) <= received and self.buffer.find(marker, end, end + len(marker)) == end:
            return True
        return None

    def _taken(self, end: int, closes: bool) -> None:
        """An entry taken whole up to ``end``: the next one starts after the ``,``, or the map
        closed there (as a piece that ``closes`` does)."""
        self._cover(end)
        if not closes:
            self.pos = self.search_from = self.end_from = end + 1
        elif self.state == _JOBS:
            self.state = _NODES
            self.pos = self.search_from = self.end_from = end + len(_JOBS_END)
            self.nodes_span = (self.pos, self.pos)
        else:
            self.state = _DONE

    def _nodes_alone(self, received: int) -> bool | None:
        """Take the kept nodes at ``pos``, else, right after one (and for two entries in a row),
        check the next entry alone; None to go on with pieces."""
        if self._take_kept(received, self._kept_node, self._took_node):
            self.misses = 0
            return True
        if not self.reused or self.misses >= 2:
            return None
        start = max(self.search_from, self.pos + 1)
        stop = arriving.entry_start(self.buffer, _NODE_ENTRY, b',"', _NODE_TAIL, start, received) \
            if start < received else -1
        if stop >= 0:
            self.misses += 1
            return True if self._piece(stop, closes=False) else None  # None: the map may end before it
        if received < self.length:
            self.search_from = max(start, received - _OVERLAP)
            return False  # the next entry start has not arrived
        return None  # the map's last entry: its end marker

    def _kept_node(self, key: bytes, value: int, received: int) -> tuple[int, Any] | None:
        """A node this worker kept (the same length and digest) at ``value``, keyed by its own
        name: (where it ends, its struct)."""
        name = value + _NAME_AT
        if self.buffer.find(b'"', name + len(key), name + len(key) + 1) < 0 \
                or self.buffer[name:name + len(key)] != key:
            return None  # not keyed by its own name: left to the pieces
        found = kept_element(self.buffer, value, received - 1, self.frozen)
        return None if found is None else (found[1], found[0])

    def _took_node(self, key: bytes, node: Any) -> None:
        self.reused += 1
        if self.nodes is not None:  # the node as its predicate decoded it: the same Struct
            self.nodes[key.decode()] = node

    def _piece(self, stop: int, closes: bool, last_try: bool = False) -> bool:
        """Decode ``buffer[pos:stop]`` as the entries of the current map; ``stop`` is the ``,``
        before the next entry or (``closes``) the ``}`` that closes the map. A piece that does
        not decode stops the stream when ``last_try`` (else the caller tries the map's end)."""
        jobs = self.state == _JOBS
        buffer, begin = self.buffer, self.pos
        key = self._plain_key(stop) if jobs and self.keeps else None
        before, after = buffer[begin - 1], buffer[stop]
        buffer[begin - 1], buffer[stop] = 0x7B, 0x7D  # "{", "}"
        started = time.perf_counter()
        try:
            with memoryview(buffer) as view, view[begin - 1:stop + 1] as piece:
                decoded = (self.jobs_decoder if jobs else self.nodes_decoder).decode(piece)
        except DECODE_ERRORS:
            if last_try:
                self.state = _OFF
            return False
        finally:
            buffer[begin - 1], buffer[stop] = before, after
            self.busy += time.perf_counter() - started
        self.pieces += 1
        if not jobs and self.nodes is not None:
            self.nodes.update(decoded)
        if jobs:
            self.jobs.update(decoded)
            if key is not None and len(decoded) == 1:  # one job under a plain key: kept (by value)
                name, value = key.decode(), begin + len(key) + 3
                if name in decoded:
                    self.new_jobs[name] = (stop - value, digest(buffer, value, stop), decoded[name])
        self._cover(stop)
        if not closes:
            self.pos = self.search_from = self.end_from = stop + 1
            return True
        if jobs:
            self.state = _NODES
            self.pos = self.search_from = self.end_from = stop + len(_JOBS_END)
            self.nodes_span = (self.pos, self.pos)
        else:
            self.state = _DONE
        return True

    def _cover(self, stop: int) -> None:
        if self.state == _JOBS:
            self.jobs_span = (self.jobs_span[0], stop)
        else:
            self.nodes_span = (self.nodes_span[0], stop)

    def finish(self) -> Any:
        """The pruned onSessionOpen (``snapshot.decode_open_body``'s result) once every byte
        arrived; raises ``WireError`` exactly as the whole decoder does."""
        while self.feed(self.length):
            pass
        decoder = open_body_decoder(self.frozen)
        if self.state == _OFF or (self.pieces == 0 and self.reused == 0 and self.jobs_reused == 0):
            return decode_json(decoder, self.buffer)
        sentinel = b'"\\u0000' + os.urandom(8).hex().encode() + b'"'
        head = bytearray()
        at = last = 0
        for first, covered in (self.jobs_span, self.nodes_span):
            if covered > first:  # cut the covered entries, put the sentinel in their place
                head += self.buffer[at:first]
                head += sentinel + b":null"
                at, last = covered, first
        try:
            pruned = self._decode_skeleton(decoder, head, at, last)
        except DECODE_ERRORS:
            return decode_json(decoder, self.buffer)  # the whole decoder's error, path and all
        key = msgspec.json.decode(sentinel)
        if self.jobs_span[1] > self.jobs_span[0]:
            rest = pruned.Jobs
            if key in rest:  # the Jobs map the pieces came from is the one kept
                del rest[key]
                merged = self.jobs
                merged.update(rest)
                pruned.Jobs = merged
                self._keep_jobs()
        if self.nodes_span[1] > self.nodes_span[0] and key in pruned.Nodes:
            rest = pruned.Nodes  # the sentinel stands for the pieces' nodes (checked or kept)
            del rest[key]
            if self.nodes is not None:
                merged = self.nodes
                merged.update(rest)
                pruned.Nodes = merged
        return pruned

    def _decode_skeleton(self, decoder: msgspec.json.Decoder, head: bytearray, at: int, last: int) -> Any:
        """``head`` followed by the body from ``at`` on (what no piece covered), decoded. The rest
        of the body (``RevocableNodes``: ~6 MB at 500 x 30) is not copied: ``head`` is written
        over the end of the last covered span (``[last, at)``, bytes no decode reads again) and
        the body decoded from there, then those bytes are put back (the body is left as it
        arrived). A covered span shorter than ``head`` is copied as before."""
        buffer, start = self.buffer, at - len(head)
        if start < last:
            return decoder.decode(head + buffer[at:self.length])
        saved = bytes(buffer[start:at])
        buffer[start:at] = head
        try:
            with memoryview(buffer) as view, view[start:self.length] as skeleton:
                return decoder.decode(skeleton)
        finally:
            buffer[start:at] = saved

    def _keep_jobs(self) -> None:
        """This open's jobs are the ones the next open of this worker compares with."""
        global _kept_jobs
        _kept_jobs = _KeptJobs(self.frozen, self.new_jobs)  # empty when node_reuse_bytes is 0


def _job_start(buffer: Any, start: int, end: int) -> int:
    """Where the first job entry found in ``buffer[start:end]`` begins (its ``,``), or -1: found
    by the ``Q`` of its ``"Queue":``, then matched from its head as ``arriving.entry_start`` does.
    It may miss one (a value in another field order): the piece up to the next one then holds two
    entries, decodes all the same, and is not kept as one job."""
    search = start
    while True:
        q = buffer.find(b"Q", search, end)
        if q < 0:
            return -1
        search = q + 1
        if q < 1 or buffer.find(_JOB_QUEUE, q - 1, q - 1 + len(_JOB_QUEUE)) != q - 1:
            continue
        at = buffer.rfind(_JOB_TAIL, max(start, q - _QUEUE_AFTER_TAIL), q)
        if at < 0:
            continue
        found = arriving.entry_start(buffer, _JOB_ENTRY, b',"', _JOB_TAIL, max(start, at - arriving.HEAD_BYTES),
                                     at + len(_JOB_TAIL))
        if found >= 0:
            return found


def decode_streamed(body: Any, reads: Reads | None = None, step: int = PIECE_BYTES,
                    piece_bytes: int = PIECE_BYTES) -> Any:
    """The whole body through ``OpenStream`` as if it had arrived ``step`` bytes at a time, in
    pieces of ``piece_bytes`` and more (tests compare it with ``snapshot.decode_open_body``);
    ``body`` must be writable; bodies of any size are streamed."""
    stream = OpenStream(body, len(body), reads, piece_bytes=piece_bytes, stream_from=0)
    arriving.feed_in_steps(stream, len(body), step)
    return stream.finish()
