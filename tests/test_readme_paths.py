"""The README works from a fresh clone: every repository path it names exists, its request bodies
are in the repository (``samples/volcano/``, never a path beside the checkout), its walkthrough's
fixtures pass with the documented command, and the verbs table's rows that need an open session
answer as written once the session-opening call it shows was sent.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from policy_extender import cli
from policy_extender.fixture_runner.exchange import CaseError, Exchanger
from policy_extender.policyset import load_directories

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
#: What the walkthrough makes itself (a user's own directory, a recording, a candidate set).
MADE_BY_THE_WALKTHROUGH = {"my-policies", "rec", "candidate", "recorded"}
VERBS = ["onSessionOpen", "onSessionClose", "predicate", "prioritize", "preemptable", "reclaimable",
         "jobEnqueueable", "jobEnqueued", "queueOverused", "jobReady", "allocateFunc", "deallocateFunc"]


def named_paths(text: str) -> list[str]:
    """The paths the README names as files of this repository: link targets, ``@file`` request
    bodies, and backticked relative paths whose first part is an entry of the repository's root
    (or ``..``, which leaves it)."""
    top = {p.name for p in ROOT.iterdir()}
    links = [t.split("#")[0] for t in re.findall(r"\]\(([^)\s]+)\)", text) if "://" not in t]
    bodies = re.findall(r"--data-binary @(\S+)", text)
    quoted = [t for t in re.findall(r"`([^`\s]+)`", text)
              if "/" in t and "://" not in t and not t.startswith("/")
              and (t.split("/")[0] in top or t.startswith(".."))]
    return [p for p in links + bodies + quoted if p and p.split("/")[0] not in MADE_BY_THE_WALKTHROUGH]


def exists(path: str) -> bool:
    pattern = re.sub(r"<[^>]+>", "*", path.split(":")[0])
    if "*" in pattern:
        return any(ROOT.glob(pattern))
    return (ROOT / pattern).exists()


def test_every_repository_path_the_readme_names_exists():
    paths = named_paths(README)
    outside = [p for p in paths if p.startswith("..")]
    assert not outside, f"the README names paths outside the repository: {outside}"
    assert "samples/volcano/predicate.json" in paths and "docs/language.md" in paths  # the check reads them
    missing = [p for p in paths if not exists(p)]
    assert not missing, f"the README names paths that are not in the repository: {missing}"


def test_the_samples_are_the_bodies_the_suite_decodes_one_per_verb():
    shipped = ROOT / "samples" / "volcano"
    assert sorted(p.stem for p in shipped.glob("*.json")) == sorted(VERBS)
    for body in shipped.glob("*.json"):
        assert body.read_bytes() == (ROOT / "tests" / "samples" / body.name).read_bytes(), \
            f"{body} differs from tests/samples/{body.name}: copy the one you changed over the other"


def walkthrough_policies(directory: Path) -> Path:
    """my-policies/ as the README's walkthrough leaves it: zone.policy with the fix, its fixtures."""
    policy = re.search(r"`my-policies/zone.policy` \(with a typo on line 2\):\n\n```\n(.*?)```", README, re.S)
    fixtures = re.search(r"`my-policies/zone.fixtures.yaml`.*?```yaml\n(.*?)```", README, re.S)
    fix = re.search(r"adding a line under `unresolvable`:\n\n```\n(.*?)```", README, re.S)
    assert policy and fixtures and fix, "the README's walkthrough moved: update this test"
    text = policy.group(1).replace("node.lables", "node.labels")
    text = text.replace("    unresolvable\n", "    unresolvable\n" + fix.group(1))
    directory.mkdir()
    (directory / "zone.policy").write_text(text)
    (directory / "zone.fixtures.yaml").write_text(fixtures.group(1))
    return directory


def test_the_walkthrough_fixtures_pass_with_the_documented_command(tmp_path, capsys):
    directory = walkthrough_policies(tmp_path / "my-policies")
    assert cli.main(["test", str(directory)]) == 0
    assert capsys.readouterr().out.endswith("4 passed, 0 failed\n")


def test_the_readme_says_how_pytest_gets_into_the_environment_of_command_1():
    command_1 = re.search(r"# 1\. .*\n(.*)\n", README)
    assert command_1 and "pip install -q -e . " in command_1.group(1) + " "  # no test extra: no pytest
    before = README[:README.index("`pytest\nmy-policies/`")]
    assert before.rstrip().endswith("`pip install pytest`, then")


# --------------------------------------------------------------------- the verbs table's session


def session_call() -> bytes:
    """The body of the README's session-opening call (the curl before the verbs table)."""
    found = re.search(r"/onSessionOpen -d '(\{.*?\})'\n\{\}\n```", README, re.S)
    assert found, "the README's session-opening call moved: update this test"
    return found.group(1).encode()


def table_body(verb: str, pattern: str = "") -> bytes:
    row = next(line for line in README.splitlines() if line.startswith(f"| `{verb}` |"))
    if pattern:
        return re.search(pattern, row).group(0).encode()  # type: ignore[union-attr]  # asserted by the test
    return row.split(" | ")[1].strip("`").encode()


@pytest.fixture
def service():
    exchanger = Exchanger(load_directories([ROOT / "policies"]))
    yield exchanger
    exchanger.service.stop()


def test_the_rows_that_need_a_session_answer_as_written_after_the_call_shown(service):
    vip = b'{"job": ' + table_body("jobEnqueueable", r'\{"UID": "ml/vip"[^}]*\}') + b"}"
    allocate, deallocate = table_body("allocateFunc"), table_body("deallocateFunc")
    assert service.call("jobEnqueueable", vip) == {"status": 0}  # without a session: abstains
    with pytest.raises(CaseError, match="HTTP 503: allocateFunc: no session is open"):
        service.call("allocateFunc", allocate)
    assert service.call("onSessionOpen", session_call()) == {}
    assert service.call("jobEnqueueable", vip) == {"status": 1}
    assert service.call("jobEnqueueable", table_body("jobEnqueueable")) == {"status": -1}
    assert service.call("allocateFunc", allocate) == {"errorMessage": ""}
    assert service.call("deallocateFunc", deallocate) == {"errorMessage": ""}
    assert service.call("onSessionClose", b"{}") == {}
    assert json.loads(session_call())["Queues"]["research"]["Queue"]["status"]["state"] == "Open"
