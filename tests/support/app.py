"""A fresh app per test (``create_app``) on real policy files in a temp dir and a real SQLite
session store, driven through ``app.test_client()``. tests/conftest.py offers the fixtures to
every folder (``pytest_plugins``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable, Iterator

import pytest

from policy_extender.config import Config
from policy_extender.web import create_app

from tests.support.bodies import sample
from tests.support.policies import POLICIES, write_policies


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
