"""A recording directory back into cycles: every worker's file of a cycle merged in start-time
order (ties: pid, then the worker's sequence number). Damage is collected as ``frames.Problem``
(file and byte offset) and the rest is read on.
"""

from __future__ import annotations

import os
import zlib
from dataclasses import dataclass, field
from typing import Iterator

from policy_extender.record import frames
from policy_extender.record.frames import Problem
from policy_extender.verb_names.volcano import ON_SESSION_OPEN


@dataclass(frozen=True)
class RecordedCall:
    """One recorded verb call."""

    verb: str
    status: int
    policy_version: str
    started_ns: int
    pid: int
    seq: int
    request: bytes
    response: bytes
    where: str            # file:offset of its record
    dropped_before: int = 0


@dataclass
class RecordedCycle:
    """One scheduling cycle (or one hour of calls outside any session)."""

    name: str
    session_id: str
    calls: list[RecordedCall] = field(default_factory=list)

    @property
    def dropped(self) -> int:
        """Calls the recorder dropped (queue full): the cycle is incomplete when non-zero."""
        return sum(call.dropped_before for call in self.calls)

    @property
    def opens(self) -> bool:
        return bool(self.calls) and self.calls[0].verb == ON_SESSION_OPEN


def cycle_dirs(directory: str) -> list[str]:
    """The cycle directories of a recording, oldest first; a cycle directory given alone is
    its own recording."""
    if _rec_files(directory):
        return [directory]
    names = sorted(entry.name for entry in os.scandir(directory) if entry.is_dir())
    return [os.path.join(directory, name) for name in names]


def _rec_files(directory: str) -> list[str]:
    return sorted(entry.path for entry in os.scandir(directory)
                  if entry.is_file() and entry.name.endswith(".rec"))


def read_cycles(directory: str, problems: list[Problem]) -> Iterator[RecordedCycle]:
    """Every cycle of the recording, one at a time (a cycle's bodies are in memory only while
    it is replayed)."""
    for path in cycle_dirs(directory):
        cycle = read_cycle(path, problems)
        if cycle.calls:
            yield cycle


def read_cycle(path: str, problems: list[Problem]) -> RecordedCycle:
    cycle = RecordedCycle(os.path.basename(os.path.normpath(path)), "")
    for file in _rec_files(path):
        cycle.calls.extend(_calls_of(file, cycle, problems))
    cycle.calls.sort(key=lambda call: (call.started_ns, call.pid, call.seq))
    return cycle


def _calls_of(file: str, cycle: RecordedCycle, problems: list[Problem]) -> Iterator[RecordedCall]:
    records = frames.read_records(file, problems)
    for offset, record in records:
        if offset == 0:
            if not _sound_header(file, record, problems):
                return
            cycle.session_id = record.get("session_id") or cycle.session_id
            continue
        call = _call(file, offset, record, problems)
        if call is not None:
            yield call


def _sound_header(file: str, record: dict, problems: list[Problem]) -> bool:
    if record.get("type") != "header":
        problems.append(Problem(file, 0, "no header record: not a policy-extender recording; "
                                "file skipped"))
        return False
    if record.get("format") != frames.FORMAT_VERSION:
        problems.append(Problem(file, 0, f"recording format {record.get('format')!r}, this "
                                f"version reads format {frames.FORMAT_VERSION}; file skipped"))
        return False
    return True


def _call(file: str, offset: int, record: dict, problems: list[Problem]) -> RecordedCall | None:
    try:
        return RecordedCall(record["verb"], record["status"], record["policy_version"],
                            record["started_ns"], record["pid"], record["seq"],
                            _body(record, "request"), _body(record, "response"),
                            f"{file}:{offset}", record.get("dropped_before", 0))
    except (KeyError, TypeError, zlib.error) as error:
        problems.append(Problem(file, offset, f"unreadable call record ({type(error).__name__}: "
                                f"{error}): skipped"))
        return None


def _body(record: dict, key: str) -> bytes:
    """A body as recorded: ``encoding`` ``zlib`` (compressed) or ``identity``."""
    encoding = record.get("encoding", "zlib")
    if encoding == "identity":
        return bytes(record[key])
    if encoding != "zlib":
        raise KeyError(f"unknown body encoding {encoding!r}")
    return frames.decompress(record[key])
