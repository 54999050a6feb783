"""The README and the guides it sends a newcomer to work from a fresh clone: every repository path
they name exists, their request bodies are in the repository (``samples/volcano/``, never a path
beside the checkout), the README's 30-second example answers as shown, the tutorial's fixtures
pass with the documented command, and docs/volcano.md's verbs table rows that need an open
session answer as written once the session-opening call it shows was sent.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from policy_extender import cli
from policy_extender.fixture_runner.exchange import CaseError, Exchanger
from policy_extender.policyset import load_directories
from policy_extender.verb_names.volcano import VERB_KINDS

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
#: The walkthrough of a first policy, and the Volcano guide with the verbs table (once the README's).
TUTORIAL = (ROOT / "docs" / "tutorial.md").read_text(encoding="utf-8")
VOLCANO = (ROOT / "docs" / "volcano.md").read_text(encoding="utf-8")
#: The pages a newcomer reads first: the README, the guides it sends them to, how to contribute.
GUIDES = ["README.md", "CONTRIBUTING.md", "docs/tutorial.md", "docs/volcano.md", "docs/development.md"]
#: What the walkthrough makes itself (a user's own directory, a recording, a candidate set).
MADE_BY_THE_WALKTHROUGH = {"my-policies", "rec", "candidate", "recorded"}
VERBS = list(VERB_KINDS)  # a sample body per verb of the table


def named_paths(text: str, where: str = ".") -> list[str]:
    """The paths a page (in the folder ``where`` of the repository) names as files of this
    repository, relative to its root: link targets (relative to the page), ``@file`` request
    bodies, and backticked relative paths whose first part is an entry of the repository's root
    (or ``..``, which leaves it)."""
    top = {p.name for p in ROOT.iterdir()}
    links = [os.path.normpath(os.path.join(where, t.split("#")[0]))
             for t in re.findall(r"\]\(([^)\s]+)\)", text) if "://" not in t and not t.startswith("#")]
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


@pytest.mark.parametrize("page", GUIDES)
def test_every_repository_path_a_guide_names_exists(page):
    paths = named_paths((ROOT / page).read_text(encoding="utf-8"), os.path.dirname(page) or ".")
    outside = [p for p in paths if p.startswith("..")]
    assert not outside, f"{page} names paths outside the repository: {outside}"
    missing = [p for p in paths if not exists(p)]
    assert not missing, f"{page} names paths that are not in the repository: {missing}"


def test_the_path_reader_reads_links_relative_to_their_page():
    paths = named_paths(TUTORIAL, "docs")
    assert "samples/volcano/predicate.json" in paths and "docs/language.md" in paths  # the check reads them
    assert "docs/tutorial.md" in named_paths(README) and "BENCHMARKS.md" in named_paths("[b](../BENCHMARKS.md)", "docs")


def test_the_samples_are_the_bodies_the_suite_decodes_one_per_verb():
    shipped = ROOT / "samples" / "volcano"
    assert sorted(p.stem for p in shipped.glob("*.json")) == sorted(VERBS)
    for body in shipped.glob("*.json"):
        assert body.read_bytes() == (ROOT / "tests" / "samples" / body.name).read_bytes(), \
            f"{body} differs from tests/samples/{body.name}: copy the one you changed over the other"


def walkthrough_policies(directory: Path) -> Path:
    """my-policies/ as the tutorial leaves it: zone.policy with the fix, its fixtures."""
    policy = re.search(r"`my-policies/zone.policy` \(with a typo on line 2\):\n\n```\n(.*?)```", TUTORIAL, re.S)
    fixtures = re.search(r"`my-policies/zone.fixtures.yaml`.*?```yaml\n(.*?)```", TUTORIAL, re.S)
    fix = re.search(r"adding a line under `unresolvable`:\n\n```\n(.*?)```", TUTORIAL, re.S)
    assert policy and fixtures and fix, "the tutorial's walkthrough moved: update this test"
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
    before = TUTORIAL[:TUTORIAL.index("`pytest\nmy-policies/`")]
    assert before.rstrip().endswith("`pip install pytest`, then")


# --------------------------------------------------------------------- the verbs table's session


def session_call() -> bytes:
    """The body of docs/volcano.md's session-opening call (the curl before the verbs table)."""
    found = re.search(r"/onSessionOpen -d '(\{.*?\})'\n\{\}\n```", VOLCANO, re.S)
    assert found, "docs/volcano.md's session-opening call moved: update this test"
    return found.group(1).encode()


def table_body(verb: str, pattern: str = "") -> bytes:
    row = next(line for line in VOLCANO.splitlines() if line.startswith(f"| `{verb}` |"))
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


# --------------------------------------------------------------------- the README's 30 seconds


def test_the_readme_example_checks_and_answers_as_shown(tmp_path, capsys):
    example = README[README.index("## In 30 seconds"):README.index("## Which releases")]
    policy = re.search(r"`my-policies/zone.policy`:\n\n```\n(.*?)```", example, re.S)
    call = re.search(r"/predicate -d '(\{.*?\})'\n(\{.*?\})\n```", example, re.S)
    checked = re.search(r"\$ policy-extender check my-policies/\n(.*)\n", example)
    assert policy and call and checked, "the README's example moved: update this test"
    directory = tmp_path / "my-policies"
    directory.mkdir()
    (directory / "zone.policy").write_text(policy.group(1))
    assert cli.main(["check", str(directory)]) == 0
    assert capsys.readouterr().out.strip() == checked.group(1)
    exchanger = Exchanger(load_directories([directory]))
    try:
        assert exchanger.call("predicate", call.group(1).encode()) == json.loads(call.group(2))
    finally:
        exchanger.service.stop()


def test_the_readiness_answer_shown_carries_the_bundled_policies_version():
    """The README's `curl .../readyz` answer names the version of policies/ (a hash of the files),
    which `policy-extender configmap policies` writes into the shipped ConfigMap's annotation
    (kept current by tests/ops): a changed policy file changes both."""
    shown = re.search(r'readyz` → `\{"status":"ready","version":"([0-9a-f]+)"\}`', (ROOT / "README.md").read_text())
    shipped = re.search(r"policy-extender/policy-version: ([0-9a-f]+)",
                        (ROOT / "docker" / "k8s" / "policies" / "configmap.yaml").read_text())
    assert shown and shipped and shown.group(1) == shipped.group(1)
