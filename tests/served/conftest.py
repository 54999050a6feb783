"""The served tests' fixtures: ``server``, a real ``policy-extender serve`` (gunicorn, 2 workers)
on each store kind running the test module's ``POLICIES``, and ``volcano``, a client that calls
it as Volcano does (16 workers at once). A module that needs another server defines its own
``server``; ``volcano`` then calls that one."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.policies import write_policies
from tests.support.volcano import VolcanoClient, served


@pytest.fixture(params=["sqlite", "redis"])
def server(request, tmp_path: Path):
    policies = write_policies(tmp_path / "policies", request.module.POLICIES)
    with served(tmp_path, policies, request.param) as srv:
        yield srv


@pytest.fixture
def volcano(server):
    client = VolcanoClient(server.port, workers=16)
    yield client
    client.close()
