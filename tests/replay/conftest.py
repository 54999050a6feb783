"""Recording real scheduling cycles through the service (Flask test client over the real WSGI
dispatch, a real SQLite session store), and running the replay command on them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

import pytest

from policy_extender.cli import main
from policy_extender.config import Config
from policy_extender.web import create_app

from tests import SAMPLES
ZONE = "topology.kubernetes.io/zone"
#: The sample snapshot's nodes and their zones.
NODE_ZONES = {"node-0000": "zone-c", "node-0001": "zone-c", "node-0002": "zone-a",
              "node-0003": "zone-a", "node-0004": "zone-a", "node-0005": "zone-b"}

RECORDED = {"cycle.policy": """\
filter schedulable: not node.unschedulable
score gpu: 10 * free_gpu
enqueue gang-enqueue: job.min_available <= 3
ready gang-ready: job.ready_tasks >= job.min_available
victim low: evictee.priority < evictor.priority
"""}

#: RECORDED plus a zone filter: flips exactly the nodes outside zone-a.
ZONE_ADDED = {"cycle.policy": RECORDED["cycle.policy"], "zone.policy": f"""\
filter zone-a-only: node.labels["{ZONE}"] == "zone-a"
  reason "only zone-a"
"""}


def sample(verb: str) -> bytes:
    return (SAMPLES / f"{verb}.json").read_bytes()


def write_policies(directory: Path, policies: dict[str, str]) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    for name, text in policies.items():
        (directory / name).write_text(text, encoding="utf-8")
    return directory


def cycle_calls() -> list[tuple[str, bytes]]:
    """One cycle as Volcano sends it: open, a predicate per node, prioritize, an allocation,
    the other decisions, close."""
    snapshot = json.loads(sample("onSessionOpen"))
    predicate = json.loads(sample("predicate"))
    calls = [("onSessionOpen", sample("onSessionOpen"))]
    calls += [("predicate", json.dumps({**predicate, "node": node}).encode())
              for node in snapshot["Nodes"].values()]
    calls += [(verb, sample(verb)) for verb in (
        "prioritize", "allocateFunc", "jobEnqueueable", "queueOverused", "jobReady",
        "preemptable", "reclaimable", "deallocateFunc", "onSessionClose")]
    return calls


@pytest.fixture
def record(tmp_path: Path) -> Callable:
    """``record(policies, cycles=1, **config)`` -> the recording directory, written through a
    real app with ``--record`` and flushed."""

    def run(policies: dict[str, str] = RECORDED, cycles: int = 1, **options) -> Path:
        policy_dir = write_policies(tmp_path / "recorded-policies", policies)
        options.setdefault("record", str(tmp_path / "recording"))
        app = create_app(Config(policy_dirs=(str(policy_dir),), reload_interval=0.0,
                                session_store=f"sqlite:{tmp_path / 'sessions.sqlite3'}", **options))
        client = app.test_client()
        for _ in range(cycles):
            for verb, body in cycle_calls():
                assert client.post(f"/{verb}", data=body, content_type="application/json").status_code == 200
        service = app.extensions["policy_extender"]
        service.stop()  # flushes and closes the recorder
        return Path(options["record"])

    return run


@pytest.fixture
def replay(capsys) -> Callable:
    """``replay(*args)`` -> (exit status, stdout, stderr) of ``policy-extender replay``."""

    def run(*args) -> tuple[int, str, str]:
        status = main(["replay", *map(str, args)])
        out, err = capsys.readouterr()
        return status, out, err

    return run
