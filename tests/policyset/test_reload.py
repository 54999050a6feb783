"""PolicyReloader: detection, all-or-nothing swaps, recovery, status, SIGHUP and the poll thread."""

from __future__ import annotations

import json
import logging
import os
import signal
import time

import pytest

from policy_extender.policyset.reload import PolicyReloader, install_sighup

from .kubelet import ConfigMapVolume, delete_plain, write_plain


def wait_for(condition, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.01)
    return condition()


@pytest.fixture
def volume(tmp_path):
    return ConfigMapVolume(str(tmp_path / "policies"))


@pytest.fixture
def activated():
    """Every policy set handed to on_change, in order."""
    return []


@pytest.fixture
def make_reloader(volume, language, activated):
    reloaders = []

    def make(dirs=None, **options):
        options = {"interval": 0, "inotify": False, "compile": language.compile,
                   "on_change": activated.append, **options}
        reloader = PolicyReloader(dirs or [volume.root], **options)
        reloaders.append(reloader)
        return reloader

    yield make
    for reloader in reloaders:
        reloader.stop()


def test_start_loads_the_set_and_is_ready(volume, language, make_reloader, activated):
    volume.update({"a.policy": language.good(1)})
    status = make_reloader().start().status
    assert status.ready and status.last_reload_ok and status.errors == ()
    assert status.version == activated[-1].version and status.files == ("a.policy",)
    assert [language.score_of(ps) for ps in activated] == [1]


def test_unchanged_content_in_a_new_payload_does_not_reload(volume, language, make_reloader, activated):
    volume.update({"a.policy": language.good(1)})
    reloader = make_reloader().start()
    volume.update({"a.policy": language.good(1)})
    assert reloader.poll() is False
    assert len(activated) == 1 and reloader.status.reloads_ok == 1


KUBELET_CHANGES = {
    "edit a key": lambda lang: {"a.policy": lang.good(2)},
    "add a key": lambda lang: {"a.policy": lang.good(1), "b.policy": lang.good(1)},
    "remove a key": lambda lang: {"b.policy": lang.good(1)},
}


@pytest.mark.parametrize("change", sorted(KUBELET_CHANGES))
def test_each_kind_of_configmap_change_reloads(volume, language, make_reloader, activated, change):
    volume.update({"a.policy": language.good(1), "b.policy": language.good(1)} if change == "remove a key"
                  else {"a.policy": language.good(1)})
    reloader = make_reloader().start()
    new_files = KUBELET_CHANGES[change](language)
    volume.update(new_files)
    assert reloader.poll() is True
    assert reloader.status.files == tuple(sorted(new_files))
    assert activated[-1].sources == new_files


def test_plain_directory_edit_delete_and_recreate_each_reload(tmp_path, language, make_reloader, activated):
    d = str(tmp_path)
    write_plain(d, "a.policy", language.good(1))
    write_plain(d, "b.policy", language.good(1))
    reloader = make_reloader([d]).start()
    write_plain(d, "a.policy", language.good(2))
    assert reloader.poll() and language.score_of(activated[-1]) == 3
    delete_plain(d, "b.policy")
    assert reloader.poll() and reloader.status.files == ("a.policy",)
    write_plain(d, "b.policy", language.good(1))
    assert reloader.poll() and reloader.status.files == ("a.policy", "b.policy")
    assert len(activated) == 4


def test_a_broken_update_keeps_the_last_good_set_and_reports_every_error(volume, language, make_reloader, activated):
    volume.update({"a.policy": language.good(1), "b.policy": language.good(1)})
    reloader = make_reloader().start()
    good = reloader.status
    volume.update({"a.policy": language.broken(), "b.policy": language.broken()})
    assert reloader.poll() is False
    status = reloader.status
    assert status.ready and status.version == good.version and status.loaded_at == good.loaded_at
    assert not status.last_reload_ok and status.reloads_failed == 1
    assert any(e.startswith("a.policy:2:") for e in status.errors)
    assert any(e.startswith("b.policy:2:") for e in status.errors)
    assert len(activated) == 1 and reloader.policy_set is activated[0]


def test_a_broken_set_is_logged_once_with_positions_while_it_stays(volume, language, make_reloader, caplog):
    volume.update({"a.policy": language.good(1)})
    reloader = make_reloader().start()
    volume.update({"a.policy": language.broken()})
    with caplog.at_level(logging.ERROR, logger="policy_extender.reload"):
        for _ in range(3):
            reloader.poll()
    failures = [r for r in caplog.records if "policy reload failed" in r.getMessage()]
    assert len(failures) == 1 and "a.policy:2:" in failures[0].getMessage()
    assert "keeping policy set " + reloader.status.version in failures[0].getMessage()


def test_a_fixed_update_after_a_broken_one_recovers_by_itself(volume, language, make_reloader, activated):
    volume.update({"a.policy": language.good(1)})
    reloader = make_reloader().start()
    volume.update({"a.policy": language.broken()})
    reloader.poll()
    volume.update({"a.policy": language.good(2)})
    assert reloader.poll() is True
    status = reloader.status
    assert status.last_reload_ok and status.errors == () and status.reloads_failed == 1
    assert [language.score_of(ps) for ps in activated] == [1, 2]


def test_starting_with_a_broken_set_is_not_ready_and_says_why(volume, language, make_reloader, activated):
    volume.update({"a.policy": language.broken()})
    reloader = make_reloader().start()
    status = reloader.status
    assert not status.ready and status.version is None and activated == []
    assert status.errors and status.errors[0].startswith("a.policy:2:")
    volume.update({"a.policy": language.good(1)})
    assert reloader.poll() and reloader.status.ready


def test_a_missing_directory_is_not_ready_until_it_appears(tmp_path, language, make_reloader):
    volume = ConfigMapVolume.__new__(ConfigMapVolume)
    volume.root = str(tmp_path / "later")
    reloader = make_reloader([volume.root]).start()
    assert not reloader.status.ready and "does not exist" in reloader.status.errors[0]
    ConfigMapVolume(volume.root).update({"a.policy": language.good(1)})
    assert reloader.poll() and reloader.status.ready


def test_an_activation_failure_keeps_the_previous_set(volume, language, make_reloader):
    volume.update({"a.policy": language.good(1)})
    accepted = []

    def refuse_score_2(policy_set):
        if language.score_of(policy_set) == 2:
            raise RuntimeError("store full")
        accepted.append(policy_set)

    reloader = make_reloader(on_change=refuse_score_2).start()
    volume.update({"a.policy": language.good(2)})
    assert reloader.poll() is False
    assert reloader.status.version == accepted[0].version
    assert "store full" in reloader.status.errors[0]


def test_the_status_is_json_ready_for_the_status_endpoint(volume, language, make_reloader):
    volume.update({"a.policy": language.good(1)})
    seen = []
    reloader = make_reloader(on_status=seen.append).start()
    data = json.loads(json.dumps(reloader.status.as_dict()))
    assert data["ready"] is True and data["last_reload_ok"] is True and data["version"]
    assert seen and seen[-1] == reloader.status


def test_the_poll_thread_picks_up_a_change_within_the_interval(volume, language, make_reloader, activated):
    volume.update({"a.policy": language.good(1)})
    make_reloader(interval=0.2).start()
    volume.update({"a.policy": language.good(2)})
    assert wait_for(lambda: len(activated) == 2, timeout=2)


def test_inotify_picks_up_a_change_long_before_the_interval(volume, language, make_reloader, activated):
    volume.update({"a.policy": language.good(1)})
    reloader = make_reloader(interval=60, inotify=True).start()
    if not reloader.status.inotify:
        pytest.skip("inotify is not available here")
    started = time.monotonic()
    volume.update({"a.policy": language.good(2)})
    assert wait_for(lambda: len(activated) == 2, timeout=5)
    assert time.monotonic() - started < 30


def test_an_edit_between_the_first_load_and_the_watch_is_not_missed(volume, language, make_reloader,
                                                                    activated, monkeypatch):
    """The kubelet may swap ..data while a worker boots: after the first load, before the watch."""
    from policy_extender.policyset import reload as reload_module
    real_start = reload_module.DirectoryWatcher.start

    def start_after_an_edit(watcher):
        volume.update({"a.policy": language.good(2)})  # lands before inotify watches anything
        return real_start(watcher)

    monkeypatch.setattr(reload_module.DirectoryWatcher, "start", start_after_an_edit)
    volume.update({"a.policy": language.good(1)})
    reloader = make_reloader(interval=60, inotify=True).start()
    if not reloader.status.inotify:
        pytest.skip("inotify is not available here")
    assert wait_for(lambda: len(activated) == 2, timeout=5)  # not after the 60 s interval
    assert [language.score_of(ps) for ps in activated] == [1, 2]


def test_sighup_forces_an_immediate_reload(volume, language, make_reloader, activated):
    volume.update({"a.policy": language.good(1)})
    reloader = make_reloader(interval=0).start()  # no polling: only a request reloads
    previous = signal.getsignal(signal.SIGHUP)
    try:
        install_sighup(reloader)
        volume.update({"a.policy": language.good(2)})
        time.sleep(0.2)
        assert len(activated) == 1
        os.kill(os.getpid(), signal.SIGHUP)
        assert wait_for(lambda: len(activated) == 2)
        os.kill(os.getpid(), signal.SIGHUP)  # forced: recompiles even unchanged content
        assert wait_for(lambda: reloader.status.reloads_ok == 3)
    finally:
        signal.signal(signal.SIGHUP, previous)


# ---------------------------------------------------------------------------------------------
# the instance's last good set, for a reloader that starts while the files are broken


@pytest.fixture
def last_good(tmp_path):
    from policy_extender.policyset.versions import LastGoodCopy
    return LastGoodCopy(str(tmp_path / "runtime" / "last-good.json"))


def test_a_reloader_starting_on_broken_files_serves_the_instances_last_good_set(
        volume, language, make_reloader, activated, last_good, tmp_path):
    os.makedirs(tmp_path / "runtime")
    good = {"a.policy": language.good(1)}
    last_good.save(language.compile(good).version, good)
    volume.update({"a.policy": language.broken()})
    restored, errors_seen = [], []
    status = make_reloader(fallback=lambda: last_good.load()[1], on_restore=restored.append,
                           on_error=errors_seen.append).start().status
    assert status.ready and status.from_last_good
    assert status.version == language.compile(good).version and status.files == ("a.policy",)
    assert status.last_reload_ok is False and status.errors[0].startswith("a.policy:2:")
    assert [language.score_of(ps) for ps in restored] == [1] and activated == []
    assert errors_seen[-1].version == status.version and not errors_seen[-1].last_reload_ok


def test_after_the_last_good_set_the_fixed_files_load_as_usual(volume, language, make_reloader, activated,
                                                               last_good, tmp_path):
    os.makedirs(tmp_path / "runtime")
    good = {"a.policy": language.good(1)}
    last_good.save(language.compile(good).version, good)
    volume.update({"a.policy": language.broken()})
    reloader = make_reloader(fallback=lambda: last_good.load()[1]).start()
    assert reloader.status.from_last_good
    volume.update({"a.policy": language.good(2)})
    assert reloader.poll()
    status = reloader.status
    assert status.last_reload_ok and not status.from_last_good and status.errors == ()
    assert [language.score_of(ps) for ps in activated] == [1, 2]  # on_restore defaults to on_change


def test_without_a_last_good_set_a_broken_start_stays_not_ready(volume, language, make_reloader, last_good):
    volume.update({"a.policy": language.broken()})
    status = make_reloader(fallback=lambda: (last_good.load() or (None, None))[1]).start().status
    assert not status.ready and not status.from_last_good and status.errors


def test_a_last_good_copy_that_does_not_compile_leaves_the_reloader_not_ready(
        volume, language, make_reloader, caplog):
    volume.update({"a.policy": language.broken()})
    with caplog.at_level(logging.ERROR, logger="policy_extender.reload"):
        status = make_reloader(fallback=lambda: {"a.policy": language.broken()}).start().status
    assert not status.ready
    assert "the last good policy set of this instance does not load either" in caplog.text


def test_the_last_good_copy_is_replaced_whole_and_never_read_half_written(last_good, tmp_path):
    os.makedirs(tmp_path / "runtime")
    assert last_good.load() is None
    last_good.save("v1", {"a.policy": "score 1\n"})
    last_good.save("v2", {"a.policy": "score 2\n", "b.policy": "score 3\n"})
    assert last_good.load() == ("v2", {"a.policy": "score 2\n", "b.policy": "score 3\n"})
    assert os.listdir(tmp_path / "runtime") == ["last-good.json"]  # no temporary file left
    (tmp_path / "runtime" / "last-good.json").write_text('{"sources": {"a.policy": ')
    assert last_good.load() is None  # unreadable: ignored (and logged), never half a set


def test_saving_the_last_good_copy_never_fails_the_activation(tmp_path, caplog):
    from policy_extender.policyset.versions import LastGoodCopy
    copy = LastGoodCopy(str(tmp_path / "missing-dir" / "last-good.json"))
    with caplog.at_level(logging.WARNING, logger="policy_extender.store"):
        copy.save("v1", {"a.policy": "score 1\n"})
    assert "could not save the last good policy set v1" in caplog.text
