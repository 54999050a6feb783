"""Several real OS processes (fork and spawn) share one store: each sees the session another
opened, and their concurrent events add up exactly. A per-process dict, the naive design, fails
the same checks, which shows the checks can fail."""

from __future__ import annotations

import os

import pytest

from policy_extender.session import SessionCache, decode_allocation
from policy_extender.session.counts import count

from .cluster import JOBS, SOURCES, Plan, decode_snapshot, encode_snapshot, expected_records, run_processes

# Every test starts processes (fork and spawn).
pytestmark = pytest.mark.slow

START_METHODS = ("fork", "spawn")
PLAN = Plan()


class ProcessLocalStore:
    """The naive store: a dict in each process. Deliberately wrong across processes."""

    def __init__(self) -> None:
        self.session = None  # (session_id, seq, version, snapshot)
        self.records: dict[str, tuple[int, str, bytes]] = {}  # uid -> (net, last kind, record)
        self.log: list = []
        self.sources: dict[str, dict] = {}

    def open(self, snapshot, policy_version, policy_sources):
        self.session, self.records, self.log = ["local", 0, policy_version, snapshot], {}, []
        self.sources.setdefault(policy_version, policy_sources)
        return "local"

    def head(self):
        from policy_extender.session.store import Head
        if self.session is None:
            return None
        return Head(*self.session[:3], 0.0, self.log[-1].tip if self.log else "")

    def snapshot(self, session_id):
        return self.session[3] if self.session else None

    def lost(self):
        return None

    def policy_sources(self, version):
        return self.sources.get(version)

    def allocate(self, session_id, task_uid, record):
        return self._event(task_uid, record, "+")

    def deallocate(self, session_id, task_uid, record):
        return self._event(task_uid, record, "-")

    def _event(self, task_uid, record, kind):
        from policy_extender.session.store import Change
        net, last, _ = self.records.get(task_uid, (0, "", b""))
        if last == kind == "-":
            return True
        net += 0 if last == kind else (1 if kind == "+" else -1)
        self.records[task_uid] = (net, kind, record)
        self.log.append(Change(task_uid, net, record, f"tip{len(self.log) + 1}"))
        self.session[1] += 1
        return True

    def allocations(self, session_id):
        return [(net, record) for net, _, record in self.records.values() if net]

    def changes(self, session_id, after_seq):
        return self.log[after_seq:]

    def ended(self, session_id):
        return False


def play_cycle(store, start_method):
    """Open in this process, let the children send events; what they saw and the final totals."""
    session_id = store.open(encode_snapshot(), "v1", SOURCES)
    reports = run_processes(store, start_method, PLAN)
    assert [error for *_, error in reports] == [None] * PLAN.processes
    cache = SessionCache(store, decode_snapshot, decode_allocation)
    return session_id, reports, sums(cache.env().counters)


def sums(counted):
    """Counters as comparable data: (total, by queue, by job, by node)."""
    return counted.total, counted.by_queue, counted.by_job, counted.by_node


def expected_totals():
    return sums(count(expected_records(PLAN), JOBS.get))


@pytest.mark.parametrize("start_method", START_METHODS)
def test_processes_see_the_session_another_opened(make_store, start_method):
    session_id, reports, _ = play_cycle(make_store(), start_method)
    pids = {pid for _, pid, _, _ in reports}
    assert len(pids) == PLAN.processes and os.getpid() not in pids
    assert [seen for _, _, seen, _ in reports] == [(session_id, "v1", encode_snapshot(), SOURCES)] * PLAN.processes


@pytest.mark.parametrize("start_method", START_METHODS)
def test_concurrent_events_from_processes_add_up_exactly(make_store, start_method):
    _, _, totals = play_cycle(make_store(), start_method)
    expected = expected_totals()
    assert totals[0].tasks == len(expected_records(PLAN))
    assert totals == expected


@pytest.mark.parametrize("start_method", START_METHODS)
def test_a_per_process_dict_loses_the_events(start_method):
    _, _, totals = play_cycle(ProcessLocalStore(), start_method)
    assert totals[0].tasks == 0  # every event stayed in a child's own dict
    assert totals != expected_totals()
