"""Fixtures of the web tests: real policy files in a temp dir, a real SQLite session store, and a
fresh app (``create_app``) per test, driven through ``app.test_client()``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable, Iterator

import pytest

from policy_extender.config import Config
from policy_extender.web import create_app

from tests import SAMPLES

#: The policies most tests run: one rule of every kind, each readable from the sample bodies.
POLICIES = {
    "zone.policy": """\
filter zone: node.labels["topology.kubernetes.io/zone"] != "zone-b"
  reason "zone-b is reserved"
score gpu: 10 * free_gpu
""",
    "gang.policy": """\
enqueue gang-enqueue: job.min_available <= 3
overused cap: queue.name == "restricted"
ready gang-ready: job.ready_tasks >= job.min_available
victim low: evictee.priority < evictor.priority
""",
}


def sample(verb: str) -> bytes:
    """The sample body of ``verb`` (compact JSON, as Volcano sends it)."""
    return (SAMPLES / f"{verb}.json").read_bytes()


def sample_json(verb: str) -> dict:
    return json.loads(sample(verb))


def write_policies(directory: Path, policies: dict[str, str]) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    for name, text in policies.items():
        (directory / name).write_text(text, encoding="utf-8")
    return directory


@pytest.fixture
def make_app(tmp_path: Path) -> Iterator[Callable]:
    """``make_app(policies=..., **config)``: a started app on its own policy dir and store."""
    apps: list = []

    def make(policies: dict[str, str] | None = None, **options):
        policy_dir = write_policies(tmp_path / f"policies{len(apps)}",
                                    POLICIES if policies is None else policies)
        options.setdefault("policy_dirs", (str(policy_dir),))
        options.setdefault("session_store", f"sqlite:{tmp_path / 'sessions.sqlite3'}")
        options.setdefault("reload_interval", 0.0)
        app = create_app(Config(**options))
        apps.append(app)
        return app

    yield make
    for app in apps:
        app.extensions["policy_extender"].stop()


@pytest.fixture
def app(make_app):
    return make_app()


@pytest.fixture
def client(app):
    return app.test_client()


def post(client, verb: str, body: bytes | dict | None = None, **kwargs):
    """POST ``body`` (the sample when None) to ``/<verb>`` as Volcano does."""
    if body is None:
        body = sample(verb)
    elif isinstance(body, dict):
        body = json.dumps(body).encode()
    kwargs.setdefault("content_type", "application/json")
    return client.post(f"/{verb}", data=body, **kwargs)
