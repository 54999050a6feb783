"""A damaged recording is reported with its file and record offset and skipped, never fatal."""

from __future__ import annotations

import json

from policy_extender.record import frames
from policy_extender.replay.reading import read_cycles
from tests.support.policies import write_policies
from tests.support.recorded import RECORDED


def offsets(file) -> list[int]:
    return [offset for offset, _ in frames.read_records(str(file), [])]


def test_truncated_file_keeps_the_whole_records_before_the_cut(record, replay, tmp_path):
    recording = record()
    [file] = recording.rglob("*.rec")
    data = file.read_bytes()
    last = offsets(file)[-1]
    file.write_bytes(data[:last + 20])
    problems: list = []
    [cycle] = list(read_cycles(str(recording), problems))
    assert len(cycle.calls) == 15
    assert [(p.file, p.offset) for p in problems] == [(str(file), last)]
    assert "truncated" in problems[0].message
    status, out, _ = replay(recording, "--policies", write_policies(tmp_path / "p", RECORDED))
    assert status == 0
    assert out.startswith(f"problem: {file}: record at byte offset {last}: truncated")


def test_a_corrupt_record_is_skipped_and_the_rest_read(record, replay, tmp_path):
    recording = record()
    [file] = recording.rglob("*.rec")
    data = bytearray(file.read_bytes())
    third = offsets(file)[3]          # the second predicate
    data[third + 40] ^= 0xFF
    file.write_bytes(bytes(data))
    status, out, _ = replay(recording, "--policies", write_policies(tmp_path / "p", RECORDED), "--json")
    report = json.loads(out)
    assert status == 0
    assert report["problems"] == [{"file": str(file), "offset": third,
                                   "message": "checksum mismatch: record skipped"}]
    assert report["summary"]["calls"] == 15


def test_garbage_in_the_middle_ends_that_file_only(record, tmp_path):
    recording = record(cycles=2)
    first, second = sorted(recording.rglob("*.rec"))
    cut = offsets(first)[5]
    first.write_bytes(first.read_bytes()[:cut] + b"garbage, not a frame" * 3)
    problems: list = []
    cycles = list(read_cycles(str(recording), problems))
    assert [len(c.calls) for c in cycles] == [4, 16]
    assert len(problems) == 1 and problems[0].offset == cut and "not a record marker" in problems[0].message


def test_a_file_that_is_not_a_recording_is_skipped(record, tmp_path):
    recording = record()
    cycle_dir = next(p for p in recording.iterdir() if p.is_dir())
    (cycle_dir / "stray.rec").write_bytes(frames.frame({"type": "call"}))
    problems: list = []
    [cycle] = list(read_cycles(str(recording), problems))
    assert len(cycle.calls) == 16 and "no header record" in problems[0].message


def test_a_cycle_whose_open_was_lost_is_skipped_with_a_note(record, replay, tmp_path):
    recording = record()
    [file] = recording.rglob("*.rec")
    data = bytearray(file.read_bytes())
    data[offsets(file)[1] + 40] ^= 0xFF   # the onSessionOpen record
    file.write_bytes(bytes(data))
    status, out, err = replay(recording, "--policies", write_policies(tmp_path / "p", RECORDED))
    assert status == 2 and "no onSessionOpen" in out and "no replayable cycle" in err
