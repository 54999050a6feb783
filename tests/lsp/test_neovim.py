"""A real editor: Neovim (Debian's package) headless, with the shipped config
(``editors/neovim/policy-extender.lua``), opens a policy file with an error; the diagnostic is at
its position with its code, a completion after ``node.`` offers the node's fields, and a hover
over a field shows its type."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
POLICY = textwrap.dedent("""\
    # a typo on line 4
    let gpus = node.idle.gpu

    filter same-zone: node.lables.zone == task.annotations.zone

    score packing: gpus
    """)


def test_neovim_shows_the_diagnostic_completes_fields_and_hovers(tmp_path):
    nvim = shutil.which("nvim")
    assert nvim, "Neovim is installed by scripts/test and .ci/run (apt-get install neovim)"
    policy = tmp_path / "zone.policy"
    policy.write_text(POLICY)
    result = tmp_path / "result.json"
    env = {**os.environ, "CONFIG": str(ROOT / "editors" / "neovim" / "policy-extender.lua"),
           "SERVER_CMD": json.dumps([sys.executable, "-m", "policy_extender", "lsp"]),
           "POLICY_FILE": str(policy), "RESULT": str(result), "HOME": str(tmp_path),
           "COMPLETE_LINE": "3", "COMPLETE_CHARACTER": "23", "HOVER_LINE": "1", "HOVER_CHARACTER": "17",
           "PYTHONPATH": str(ROOT)}
    subprocess.run([nvim, "--headless", "--clean", "-c", f"luafile {ROOT / 'tests' / 'lsp' / 'neovim_session.lua'}"],
                   env=env, cwd=tmp_path, timeout=180, check=True, stdin=subprocess.DEVNULL,
                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    seen = json.loads(result.read_text())
    assert seen["filetype"] == "policy"
    [diagnostic] = seen["diagnostics"]
    assert (diagnostic["lnum"], diagnostic["col"], diagnostic["end_col"], diagnostic["code"]) == (3, 23, 29, "E201")
    assert "did you mean 'labels'" in diagnostic["message"] and diagnostic["severity"] == 1
    assert {"labels", "idle", "allocatable", "tasks"} <= set(seen["completion"])
    assert "task" not in seen["completion"]
    assert "node.idle: resources" in seen["hover"]
