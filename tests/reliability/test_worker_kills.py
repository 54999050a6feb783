"""Replacement workers open the SQLite store under running ones: no worker may die for it and no
acknowledged allocate may be lost (reliability/kill_workers.py; before the head watch kept its
descriptor open, 3 of 14 replacements killed the surviving worker with SIGBUS)."""

from __future__ import annotations

import pytest

from tests.tools.kill_workers import Run

pytestmark = pytest.mark.slow


def test_workers_killed_every_1_5_s_kill_no_other_worker_and_lose_no_allocation():
    figures = Run(seconds=12, kill_every=1.5, clients=16).run()
    assert figures["workers_killed"] >= 6
    assert figures["unexpected_worker_deaths"] == {}
    assert figures["fatal_signal_lines"] == 0
    assert figures["acknowledged_lost"] == 0
    assert figures["allocations_stored"] <= figures["allocates_acknowledged"] + figures["allocates_uncertain"]
    # calls fail only while a killed worker's connections break
    assert figures["answered_200"] > 0.97 * figures["calls"]
