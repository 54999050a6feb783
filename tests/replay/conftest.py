"""Recording real scheduling cycles through the service (Flask test client over the real WSGI
dispatch, a real SQLite session store), and running the replay command on them."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import pytest

from policy_extender.cli import main
from policy_extender.config import Config
from policy_extender.web import create_app

from tests.support.policies import write_policies
from tests.support.recorded import RECORDED, cycle_calls


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
