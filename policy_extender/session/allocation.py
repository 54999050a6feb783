"""What the session layer needs to know about one allocate event, and a default record codec.

The wire layer turns an allocateFunc body into a record (bytes) and back; the session layer only
needs the three facts below from a decoded record, so any object with these attributes will do.
``AllocationRecord`` with ``encode_allocation`` / ``decode_allocation`` is a ready msgpack codec
for callers that have nothing better.

A record also keeps, for the views of this cycle (``session.allocations``, the tasks of
``cluster.nodes``), the event's task status and the part of its task the rules read (``task``:
Go keys, as Volcano sent them; ``wire.paths.placed_paths``). Both are trailing fields with
defaults: a record written before they existed decodes with none.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

import msgspec


class Allocation(Protocol):
    """One task placed in this cycle. ``resources``: full resource name -> whole units."""

    @property
    def job_uid(self) -> str: ...
    @property
    def node_name(self) -> str: ...
    @property
    def resources(self) -> Mapping[str, float]: ...  # read only: a frozen record fits


class AllocationRecord(msgspec.Struct, frozen=True, array_like=True):
    task_uid: str
    job_uid: str
    node_name: str
    resources: dict[str, float] = {}
    #: Volcano's TaskStatus number the event's task carried (0: not sent)
    status: int = 0
    #: the event's task as the rules read it (Go keys), or None
    task: dict[str, Any] | None = None


_ENCODER = msgspec.msgpack.Encoder()
_DECODER = msgspec.msgpack.Decoder(AllocationRecord)


def encode_allocation(record: AllocationRecord) -> bytes:
    return _ENCODER.encode(record)


def decode_allocation(data: bytes) -> AllocationRecord:
    return _DECODER.decode(data)
