"""Rules whose verb Volcano has not called in the last cycles (issue 47 item 2): a ``ready`` rule
whose conf has no ``jobReadyVerb`` is reported in the log, ``rules_not_called`` of /status and the
metric, once the tally holds enough closed cycles; a verb that was called is not. Through the
service's own handlers on a real SQLite session store (the decision tally as served)."""

from __future__ import annotations

import json
import logging

from policy_extender import metrics
from policy_extender.config import Config
from policy_extender.decide.handlers import HANDLERS
from policy_extender.decide.unserved import rules_not_called
from policy_extender.policyset import compile_sources
from policy_extender.service import Service
from policy_extender.session.sqlite import SqliteStore
from policy_extender.wire import compact

SOURCES = {"a.policy": "score most-idle: node.idle.gpu\nready gang-ready: job.ready_tasks >= job.min_available\n"}
OPEN = json.dumps(compact.session_body([], [], [{"name": "n1", "allocatable": {"gpu": 8}}])).encode()
PRIORITIZE = json.dumps(compact.prioritize_body({"name": "t0", "requests": {"gpu": 1}},
                                                [{"name": "n1", "allocatable": {"gpu": 8}}])).encode()


def service(tmp_path, cycles: int = 2, **options) -> Service:
    store = f"sqlite:{tmp_path}/sessions.sqlite"
    config = Config(policy_dirs=(str(tmp_path),), session_store=store, reload_interval=0, tally=True,
                    rules_not_called_cycles=cycles, tally_cycles=3, **options)
    svc = Service(config, sessions=SqliteStore(store[len("sqlite:"):]))
    svc.policies.activate(compile_sources(SOURCES))
    return svc


def cycle(svc: Service, *bodies: tuple[str, bytes]) -> None:
    HANDLERS["onSessionOpen"](svc, OPEN)
    for verb, body in bodies:
        HANDLERS[verb](svc, body)
    HANDLERS["onSessionClose"](svc, b"{}")


def test_a_ready_rule_whose_verb_is_never_called_is_reported(tmp_path, caplog):
    svc = service(tmp_path)
    try:
        cycle(svc, ("prioritize", PRIORITIZE))
        assert rules_not_called(svc.policies.current, svc.tally, 2) is None  # not enough cycles yet
        cycle(svc, ("prioritize", PRIORITIZE))
        with caplog.at_level(logging.WARNING, logger="policy_extender.unserved"):
            cycle(svc, ("prioritize", PRIORITIZE))  # its open sees the two closed before it
            svc.unserved.thread.join(10)  # the report is made beside the open's answer
        report = rules_not_called(svc.policies.current, svc.tally, 2)
        assert report == {"cycles": 2, "rules": [{"rule": "gang-ready", "kind": "ready", "verb": "jobReady",
                                                 "where": "a.policy:2:1"}]}
        [line] = [r.getMessage() for r in caplog.records]
        assert "Volcano has not called jobReady in the last 2 cycles" in line
        assert "ready gang-ready (a.policy:2:1)" in line and "extender.jobReadyVerb" in line
        gauge = metrics.metrics().registry.get_sample_value
        assert gauge("policy_extender_rules_not_called", {"verb": "jobReady"}) == 1
        assert gauge("policy_extender_rules_not_called", {"verb": "prioritize"}) == 0
    finally:
        svc.tally.close()


def test_a_verb_called_in_one_of_the_cycles_is_not_reported(tmp_path):
    svc = service(tmp_path)
    job = json.dumps(compact.job_body({"name": "j", "min_available": 1})).encode()
    try:
        cycle(svc, ("prioritize", PRIORITIZE), ("jobReady", job))
        cycle(svc)
        cycle(svc)
        assert rules_not_called(svc.policies.current, svc.tally, 2)["rules"] == [
            {"rule": "most-idle", "kind": "score", "verb": "prioritize", "where": "a.policy:1:1"},
            {"rule": "gang-ready", "kind": "ready", "verb": "jobReady", "where": "a.policy:2:1"}]
        cycle(svc, ("jobReady", job))
        cycle(svc)
        assert [r["verb"] for r in rules_not_called(svc.policies.current, svc.tally, 2)["rules"]] == ["prioritize"]
    finally:
        svc.tally.close()


def test_off_with_zero_cycles(tmp_path):
    svc = service(tmp_path, cycles=0)
    try:
        for _ in range(3):
            cycle(svc)
        assert rules_not_called(svc.policies.current, svc.tally, svc.unserved.cycles) is None
    finally:
        svc.tally.close()


def test_a_cycle_whose_entries_the_cap_dropped_is_no_evidence(tmp_path):
    """The store's cap may have dropped a verb's count: such a cycle says nothing."""
    svc = service(tmp_path, tally_max_entries=2)
    try:
        for _ in range(3):
            cycle(svc, ("prioritize", PRIORITIZE))
        assert rules_not_called(svc.policies.current, svc.tally, 2) is None
    finally:
        svc.tally.close()


def test_a_verb_whose_calls_come_and_go_is_logged_once_an_hour_not_every_cycle(tmp_path, caplog):
    """On a real cluster which verbs a cycle calls follows the workload: the report changes every
    few cycles, and each change logged the warnings again (3 to 5 lines a second from the shipped
    set). /status and the metric stay current; the log says each verb once per policy set and
    hour."""
    from policy_extender.decide import unserved

    svc = service(tmp_path)
    now = [1000.0]
    svc.unserved = unserved.UnservedWatch(2, clock=lambda: now[0])
    try:
        with caplog.at_level(logging.WARNING, logger="policy_extender.unserved"):
            for i in range(12):  # prioritize called in every third cycle: the report flaps
                cycle(svc, *([("prioritize", PRIORITIZE)] if i % 3 == 0 else []))
                svc.unserved.thread.join(10)
                now[0] += 1
            verbs = [r.getMessage().split()[4] for r in caplog.records]
            assert sorted(verbs) == ["jobReady", "prioritize"]   # each once, flapping or not
            assert svc.unserved.report is not None                  # /status is still current
            now[0] += unserved.RELOG_AFTER
            cycle(svc)
            svc.unserved.thread.join(10)
            assert sorted(r.getMessage().split()[4] for r in caplog.records[2:]) == ["jobReady", "prioritize"]
    finally:
        svc.tally.close()
