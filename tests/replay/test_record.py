"""Recording: the file format read back, permissions, redaction, sampling by cycle, the size cap
and drops when the queue is full."""

from __future__ import annotations

import json
import os
import stat

from policy_extender.record import frames
from policy_extender.replay.reading import read_cycles
from policy_extender.record.recorder import Recorder, sampled
from tests.support.recorded import cycle_calls, RECORDED

ENV_POLICY = {"cycle.policy": RECORDED["cycle.policy"] + """\
filter protected: task.annotations["scheduling.example.com/protected"] == "true"
"""}


def test_a_cycle_is_recorded_whole_in_order_with_answers_and_version(record):
    recording = record()
    problems: list = []
    [cycle] = list(read_cycles(str(recording), problems))
    sent = cycle_calls()
    assert problems == []
    assert [call.verb for call in cycle.calls] == [verb for verb, _ in sent]
    assert [call.request for call in cycle.calls] == [body for _, body in sent]
    assert all(call.status == 200 for call in cycle.calls)
    assert json.loads(cycle.calls[1].response) == {"status": "", "code": 0}
    assert len({call.policy_version for call in cycle.calls}) == 1 and cycle.session_id


def test_files_are_0600_in_0700_directories(record):
    recording = record()
    directories = [recording, *[p for p in recording.iterdir() if p.is_dir()]]
    files = [p for p in recording.rglob("*.rec")]
    assert files and all(stat.S_IMODE(os.stat(d).st_mode) == 0o700 for d in directories)
    assert all(stat.S_IMODE(os.stat(f).st_mode) == 0o600 for f in files)


def test_header_record_names_the_format(record):
    [file] = record().rglob("*.rec")
    offset, header = next(frames.read_records(str(file), []))
    assert offset == 0 and header["type"] == "header" and header["format"] == frames.FORMAT_VERSION


def test_redaction_blanks_values_keeps_keys_and_the_annotations_policies_read(record):
    recording = record(ENV_POLICY, record_redact=("annotations", "env"))
    [cycle] = list(read_cycles(str(recording), []))
    task = json.loads(cycle.calls[1].request)["task"]
    annotations = task["Pod"]["metadata"]["annotations"]
    original = json.loads(cycle_calls()[1][1])["task"]["Pod"]["metadata"]["annotations"]
    assert set(annotations) == set(original)
    assert annotations["scheduling.example.com/protected"] == "true"      # read by the policy
    assert annotations["volcano.sh/queue-name"] == ""                     # not read: blanked
    assert all(v == "" for k, v in task["PodAnnotations"].items() if k != "scheduling.example.com/protected")
    env = task["Pod"]["spec"]["containers"][0]["env"]
    assert env == [{"name": "VC_TASK_INDEX", "value": ""}]


def test_without_redaction_values_are_kept(record):
    [cycle] = list(read_cycles(str(record()), []))
    task = json.loads(cycle.calls[1].request)["task"]
    assert task["Pod"]["spec"]["containers"][0]["env"] == [{"name": "VC_TASK_INDEX", "value": "0"}]


def test_redacted_recording_still_replays_the_same(record, replay, tmp_path):
    from tests.support.policies import write_policies
    recording = record(ENV_POLICY, record_redact=("annotations", "env"))
    status, out, _ = replay(recording, "--policies", write_policies(tmp_path / "same", ENV_POLICY))
    assert status == 0, out


def test_sampling_is_per_cycle_and_the_same_in_every_worker(tmp_path):
    ids = [f"{i:016x}" for i in range(400)]
    kept = [sid for sid in ids if sampled(sid, 0.25)]
    assert 60 < len(kept) < 140
    first, second = Recorder(str(tmp_path / "a"), sample=0.25), Recorder(str(tmp_path / "b"), sample=0.25)
    for sid in ids[:40]:
        for verb in ("onSessionOpen", "predicate", "onSessionClose"):
            assert first.record(sid, verb, b"{}", 200, b"{}", "v", opened_at=1.0) == \
                second.record(sid, verb, b"{}", 200, b"{}", "v", opened_at=1.0) == (sid in kept)
    first.close()
    second.close()
    for recorder in (first, second):
        cycles = list(read_cycles(recorder.directory, []))
        assert sorted(c.session_id for c in cycles) == sorted(set(kept) & set(ids[:40]))
        assert all(len(c.calls) == 3 for c in cycles)


def test_sample_zero_through_the_service_records_nothing(record):
    recording = record(cycles=3, record_sample=0.0)
    assert list(recording.iterdir()) == []


def test_size_cap_deletes_the_oldest_cycles_first(tmp_path):
    recorder = Recorder(str(tmp_path / "rec"), max_bytes=60_000)
    body = os.urandom(10_000)  # incompressible
    for number in range(12):
        for _ in range(2):
            recorder.record(f"session{number:02d}", "predicate", body, 200, b"{}", "v",
                            opened_at=1_000_000.0 + number)
        recorder.flush()
    recorder.close()
    left = sorted(p.name.rsplit("-", 1)[1] for p in (tmp_path / "rec").iterdir())
    total = sum(f.stat().st_size for f in (tmp_path / "rec").rglob("*.rec"))
    assert total <= 60_000 and recorder.counts.cycles_deleted == 12 - len(left)
    assert left == [f"session{n:02d}" for n in range(12 - len(left), 12)] and len(left) >= 2


def test_a_full_queue_drops_and_counts_and_the_cycle_says_so(tmp_path):
    recorder = Recorder(str(tmp_path / "rec"), queue_bytes=100)
    assert recorder.record("s1", "onSessionOpen", b"{}", 200, b"{}", "v", opened_at=1.0)
    assert not recorder.record("s1", "predicate", b"x" * 200, 200, b"{}", "v", opened_at=1.0)
    recorder.flush()
    assert recorder.record("s1", "predicate", b"{}", 200, b"{}", "v", opened_at=1.0)
    recorder.close()
    [cycle] = list(read_cycles(recorder.directory, []))
    assert recorder.counts.dropped == 1 and cycle.dropped == 1 and len(cycle.calls) == 2


def test_a_symlink_planted_at_a_recording_file_is_not_followed(tmp_path):
    """The recorder opens its files ``O_NOFOLLOW``: a link planted where a cycle's file goes is
    not written through (the write fails and is counted), and a linked cycle directory is refused."""
    import socket as socket_module

    from policy_extender.record.recorder import cycle_name
    victim = tmp_path / "victim.txt"
    victim.write_text("untouched\n")
    recorder = Recorder(str(tmp_path / "rec"))
    cycle = cycle_name("s1", 1.0, 1.0)
    (tmp_path / "rec" / cycle).mkdir(parents=True, mode=0o700)
    (tmp_path / "rec" / cycle / f"{socket_module.gethostname()}-{os.getpid()}.rec").symlink_to(victim)
    other = tmp_path / "elsewhere"
    other.mkdir()
    (tmp_path / "rec" / cycle_name("s2", 2.0, 2.0)).symlink_to(other, target_is_directory=True)
    recorder.record("s1", "onSessionOpen", b"{}", 200, b"{}", "v", opened_at=1.0)
    recorder.record("s2", "onSessionOpen", b"{}", 200, b"{}", "v", opened_at=2.0)
    recorder.flush()
    recorder.close()
    assert victim.read_text() == "untouched\n" and not list(other.iterdir())
    assert recorder.counts.write_errors == 2
