"""The recording file format: one file per cycle per worker, a sequence of framed records.

Every record is one frame, written with a single ``writev`` on a file opened ``O_APPEND``::

    b"PX"  u32 big-endian length  u32 big-endian CRC-32 of the payload  payload
    payload = u32 meta length, meta (a msgpack map), then the blobs the meta lists, raw

``meta["blobs"]`` is ``[[name, length], ...]``: the reader puts each blob into the record under
its name. Bodies travel as blobs so the writer never copies them while holding the GIL.

The first record of a file is the header (``type: "header"``, ``format: FORMAT_VERSION``); the
others are calls (``type: "call"``): verb, blobs ``request`` and ``response`` (``encoding``
``identity``, or ``zlib`` when the recorder compresses), status, policy version, start time in
ns, worker pid and a per-worker sequence number.

A damaged frame is reported with its file and byte offset: a bad checksum skips that record
(its length is still trusted), a bad marker or a frame cut short ends the file.
"""

from __future__ import annotations

import os
import struct
import zlib
from dataclasses import dataclass
from typing import Iterator

import msgspec

FORMAT_VERSION = 1
MARKER = b"PX"
_HEAD = struct.Struct(">2sII")
#: A frame longer than this is damage, not data (the default onSessionOpen body limit is 1 GiB).
MAX_FRAME = 1 << 30

_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(dict)


@dataclass(frozen=True)
class Problem:
    """A damaged part of a recording: where (file and byte offset) and what."""

    file: str
    offset: int
    message: str

    def __str__(self) -> str:
        return f"{self.file}: record at byte offset {self.offset}: {self.message}"


_META_LENGTH = struct.Struct(">I")


def frame_parts(meta: dict, **blobs: bytes) -> list[bytes]:
    """The buffers of one frame (for ``os.writev``): no body is copied."""
    meta = {**meta, "blobs": [[name, len(blob)] for name, blob in blobs.items()]}
    encoded = _encoder.encode(meta)
    parts = [_META_LENGTH.pack(len(encoded)), encoded, *blobs.values()]
    checksum = 0
    for part in parts:
        checksum = zlib.crc32(part, checksum)
    return [_HEAD.pack(MARKER, sum(map(len, parts)), checksum), *parts]


def frame(meta: dict, **blobs: bytes) -> bytes:
    return b"".join(frame_parts(meta, **blobs))


def write_all(fd: int, parts: list[bytes]) -> None:
    """Write the buffers whole, in one ``writev`` (a regular file takes them in one call; loop
    only on a short write)."""
    total, written = sum(map(len, parts)), os.writev(fd, parts)
    if written < total:
        rest = memoryview(b"".join(parts))[written:]
        while rest:
            rest = rest[os.write(fd, rest):]


def compress(data: bytes) -> bytes:
    return zlib.compress(data, 1)


def decompress(data: bytes) -> bytes:
    return zlib.decompress(data)


def read_records(path: str, problems: list[Problem]) -> Iterator[tuple[int, dict]]:
    """(offset, record) for every sound record of ``path``; damage is appended to ``problems``."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | getattr(os, "O_NOFOLLOW", 0))  # not a planted link
        with os.fdopen(fd, "rb") as stream:
            data = stream.read()
    except OSError as error:
        problems.append(Problem(path, 0, f"cannot read: {error.strerror}"))
        return
    offset = 0
    while offset < len(data):
        record, next_offset = _record_at(path, data, offset, problems)
        if next_offset is None:
            return
        if record is not None:
            yield offset, record
        offset = next_offset


def _record_at(path: str, data: bytes, offset: int, problems: list[Problem]):
    """(record or None, next offset or None when the rest of the file cannot be trusted)."""
    if len(data) - offset < _HEAD.size:
        problems.append(Problem(path, offset, f"truncated: {len(data) - offset} bytes where a "
                                "record header needs 10 (the writer was stopped mid-record)"))
        return None, None
    marker, length, checksum = _HEAD.unpack_from(data, offset)
    if marker != MARKER or length > MAX_FRAME:
        problems.append(Problem(path, offset, "not a record marker: the file is damaged from "
                                "here on; the records before it were read"))
        return None, None
    start, end = offset + _HEAD.size, offset + _HEAD.size + length
    if end > len(data):
        problems.append(Problem(path, offset, f"truncated: the record announces {length} bytes, "
                                f"{len(data) - start} are there"))
        return None, None
    payload = data[start:end]
    if zlib.crc32(payload) != checksum:
        problems.append(Problem(path, offset, "checksum mismatch: record skipped"))
        return None, end
    try:
        return _unpack(payload), end
    except (msgspec.DecodeError, struct.error, ValueError, TypeError) as error:
        problems.append(Problem(path, offset, f"undecodable record ({error}): skipped"))
        return None, end


def _unpack(payload: bytes) -> dict:
    """meta + blobs -> one dict (blobs under their names)."""
    (meta_length,) = _META_LENGTH.unpack_from(payload, 0)
    start = _META_LENGTH.size + meta_length
    record = _decoder.decode(payload[_META_LENGTH.size:start])
    for name, length in record.pop("blobs", ()):
        if start + length > len(payload):
            raise ValueError(f"blob {name!r} runs past the end of its record")
        record[name] = payload[start:start + length]
        start += length
    return record
