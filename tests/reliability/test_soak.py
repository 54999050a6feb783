"""A short soak (~10 s; ``python -m tests.tools.soak --seconds 60`` is the dedicated run): 16
clients, kubelet-style policy swaps every second (good and broken alternating), one worker
SIGKILLed mid-run, under PYTHONFAULTHANDLER=1."""

from __future__ import annotations

import json

import pytest

from tests.tools.soak import Soak

pytestmark = pytest.mark.slow


def test_short_soak(monkeypatch):
    monkeypatch.setenv("PYTHONFAULTHANDLER", "1")
    figures = Soak(10).run()
    assert figures["client failures"] == 0, json.dumps(figures, indent=1)  # no thread died, no non-200
    assert figures["wrong decisions"] == 0, figures["wrong examples"]
    assert figures["errors"] == figures["errors near the kill"], figures  # only the killed worker's requests
    assert figures["requests"]["allocateFunc"] >= 4 and figures["requests"]["workers killed"] == 1
    assert figures["segfaults in log"] == 0 and not figures["crash lines"], figures
    for pid, (first, last) in figures["rss kB first/last third"].items():
        assert last < first * 1.25 + 10_000, (pid, first, last)  # flat: no growth beyond noise
