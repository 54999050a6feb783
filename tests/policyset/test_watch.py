"""watch.read_snapshot: a consistent view of ConfigMap volumes and plain directories."""

from __future__ import annotations

import os
import threading
import time

import pytest

from policy_extender.policyset.files import ReadError, read_snapshot
from policy_extender.policyset.watch import DirectoryWatcher

from .kubelet import ConfigMapVolume, delete_plain, write_plain

SUFFIXES = (".policy",)


def texts(directory: str) -> dict[str, str]:
    return read_snapshot([directory], SUFFIXES).sources()


def test_kubelet_helper_builds_the_configmap_layout(tmp_path):
    volume = ConfigMapVolume(str(tmp_path))
    first = volume.update({"a.policy": "A1"})
    volume.update({"a.policy": "A2"})
    entries = sorted(os.listdir(tmp_path))
    assert entries[0].startswith("..20") and entries[1:] == ["..data", "a.policy"]
    assert os.readlink(tmp_path / "a.policy") == "..data/a.policy"
    assert not os.path.exists(first)
    assert (tmp_path / "a.policy").read_text() == "A2"


def test_reads_only_policy_files_and_skips_hidden_entries(tmp_path):
    volume = ConfigMapVolume(str(tmp_path))
    volume.update({"a.policy": "A", "README.md": "not a policy", ".hidden.policy": "H"})
    assert texts(str(tmp_path)) == {"a.policy": "A"}


@pytest.mark.parametrize("step", ["payload written", "..data swapped", "new keys linked",
                                  "old payload removed", "removed keys unlinked"])
def test_every_intermediate_kubelet_state_reads_as_the_old_or_the_new_set(tmp_path, step):
    old = {"a.policy": "A1", "gone.policy": "G"}
    new = {"a.policy": "A2", "added.policy": "N"}
    volume = ConfigMapVolume(str(tmp_path))
    volume.update(old)
    seen = {}
    volume.update(new, between=lambda s: seen.setdefault(s, texts(str(tmp_path))))
    assert seen[step] in (old, new)
    assert seen[step] == (old if step == "payload written" else new)


def test_same_content_in_a_new_payload_dir_has_the_same_digest(tmp_path):
    volume = ConfigMapVolume(str(tmp_path))
    volume.update({"a.policy": "A"})
    before = read_snapshot([str(tmp_path)], SUFFIXES).digest
    volume.update({"a.policy": "A"})
    assert read_snapshot([str(tmp_path)], SUFFIXES).digest == before


def test_a_renamed_file_changes_the_digest(tmp_path):
    volume = ConfigMapVolume(str(tmp_path))
    volume.update({"a.policy": "A"})
    before = read_snapshot([str(tmp_path)], SUFFIXES).digest
    volume.update({"b.policy": "A"})
    assert read_snapshot([str(tmp_path)], SUFFIXES).digest != before


def test_plain_directory_edit_delete_and_recreate(tmp_path):
    d = str(tmp_path)
    write_plain(d, "a.policy", "A1")
    write_plain(d, "b.policy", "B")
    assert texts(d) == {"a.policy": "A1", "b.policy": "B"}
    write_plain(d, "a.policy", "A2")
    assert texts(d)["a.policy"] == "A2"
    delete_plain(d, "b.policy")
    assert texts(d) == {"a.policy": "A2"}
    write_plain(d, "b.policy", "B again")
    assert texts(d) == {"a.policy": "A2", "b.policy": "B again"}


def test_plain_directory_follows_symlinks_within_it_and_skips_dangling_ones(tmp_path):
    # (a link out of the directory is refused: tests/policyset/test_symlinks.py)
    d = tmp_path / "dir"
    elsewhere = d / "elsewhere"
    elsewhere.mkdir(parents=True)
    (elsewhere / "real.policy").write_text("R")
    os.symlink(elsewhere / "real.policy", d / "linked.policy")
    os.symlink(tmp_path / "missing.policy", d / "dangling.policy")
    assert texts(str(d)) == {"linked.policy": "R"}


def test_snapshots_taken_during_a_stream_of_kubelet_updates_are_never_mixed(tmp_path):
    volume = ConfigMapVolume(str(tmp_path))
    versions = [{"a.policy": f"A{n}", "b.policy": f"B{n}", f"only{n % 3}.policy": "x"} for n in range(40)]
    volume.update(versions[0])
    done = threading.Event()

    def update_forever():
        for files in versions[1:]:
            volume.update(files)
        done.set()

    writer = threading.Thread(target=update_forever)
    writer.start()
    reads = []
    while not done.is_set():
        try:
            reads.append(texts(str(tmp_path)))
        except ReadError:  # kept changing for every attempt: allowed, never a mixed set
            pass
    writer.join()
    assert reads and all(r in versions for r in reads)


def test_missing_directory_says_where_and_how_to_fix(tmp_path):
    with pytest.raises(ReadError, match=f"{tmp_path}/nope: policy directory does not exist.*mount"):
        read_snapshot([str(tmp_path / "nope")], SUFFIXES)


def test_non_utf8_file_is_reported_with_its_line_and_column(tmp_path):
    (tmp_path / "bad.policy").write_bytes(b"score 1\nscore \xff\n")
    with pytest.raises(ReadError, match=r"bad.policy:2:7: byte 0xff is not UTF-8"):
        texts(str(tmp_path))


def test_two_directories_are_merged_by_file_name_and_refuse_clashing_names(tmp_path):
    a, b = tmp_path / "team-a", tmp_path / "team-b"
    a.mkdir(), b.mkdir()
    (a / "x.policy").write_text("A")
    (b / "y.policy").write_text("B")
    assert read_snapshot([str(a), str(b)], SUFFIXES).sources() == {"x.policy": "A", "y.policy": "B"}
    (b / "x.policy").write_text("B")
    with pytest.raises(ReadError, match=r"team-b/x.policy: a policy file named 'x.policy' is also in .*team-a"):
        read_snapshot([str(a), str(b)], SUFFIXES)


def test_a_single_file_path_is_read_by_its_name(tmp_path):
    (tmp_path / "one.policy").write_text("O")
    assert read_snapshot([str(tmp_path / "one.policy")], SUFFIXES).sources() == {"one.policy": "O"}


def test_the_version_equals_the_one_load_directories_computes(tmp_path):
    from policy_extender.policyset import compile_sources, load_directories

    a, b = tmp_path / "a", tmp_path / "b"
    ConfigMapVolume(str(a)).update({"x.policy": "score 1\n"})
    ConfigMapVolume(str(b)).update({"y.policy": "score 2\n"})
    snapshot = read_snapshot([str(a), str(b)], SUFFIXES)
    assert compile_sources(snapshot.sources()).version == load_directories([str(a), str(b)]).version


def test_directory_watcher_wakes_on_a_kubelet_update(tmp_path):
    volume = ConfigMapVolume(str(tmp_path))
    volume.update({"a.policy": "A1"})
    woken = threading.Event()
    watcher = DirectoryWatcher([str(tmp_path)], woken.set)
    if not watcher.start():
        pytest.skip("inotify is not available here")
    try:
        time.sleep(0.1)
        woken.clear()
        volume.update({"a.policy": "A2"})
        assert woken.wait(5)
    finally:
        watcher.stop()
