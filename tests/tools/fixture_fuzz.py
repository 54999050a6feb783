"""``python -m tests.tools.fixture_fuzz --files 2000 --seed 3``: the bundled fixture files with
values at random paths of their cases replaced (``wire_fuzz.ODD_VALUES`` and a few more) or
deleted, run by the fixture runner. What must hold: nothing escapes the runner (one bad file once
ended the whole run), and no case errors with "internal error" (a bug under the runner: every bad
value is the writer's, and the message must say where and what). Prints the failures found.
"""

from __future__ import annotations

import argparse
import collections
import copy
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

import yaml

from tests.tools.wire_fuzz import DELETE, ODD_VALUES, ROOT, _paths, _set

#: a fixture writer's mistakes too: a wrong unit, a huge or negative count, a list or map in place
FIXTURE_VALUES = ODD_VALUES + ("1e999999999Gi", -5, 10**30, "abc", [None], {"gpu": "x"}, 3.7)


def run(files: int, seed: int, policy_dir: Path = ROOT / "policies") -> tuple[collections.Counter, list[dict]]:
    """(results per outcome, failures) over ``files`` mutated fixture files from ``seed``."""
    from policy_extender.fixture_runner.runner import run_paths

    rng = random.Random(seed)
    fixtures = sorted(policy_dir.glob("*.fixtures.yaml"))
    outcomes: collections.Counter = collections.Counter()
    failures: list[dict] = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in range(files):
            directory = Path(tmp) / f"run-{n}"
            directory.mkdir()
            for policy in policy_dir.glob("*.policy"):
                shutil.copy(policy, directory)
            source = rng.choice(fixtures)
            document = yaml.safe_load(source.read_text())
            for _ in range(rng.randint(1, 3)):
                paths = [path for path in _paths(document) if len(path) > 1 and path[0] == "cases"]
                value = rng.choice(FIXTURE_VALUES + (DELETE,))
                _set(document, rng.choice(paths), value if value is DELETE else copy.deepcopy(value))
            text = yaml.safe_dump(document, allow_unicode=True)
            (directory / source.name).write_text(text)
            try:
                for result in run_paths([directory / source.name]).results:
                    outcomes[result.outcome] += 1
                    if "internal error" in (result.message or ""):
                        failures.append({"file": source.name, "message": result.message, "fixture": text})
            except Exception as error:  # what escapes the runner is the finding
                failures.append({"file": source.name, "message": f"escaped: {type(error).__name__}: {error}",
                                 "fixture": text})
            shutil.rmtree(directory)
    return outcomes, failures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.tools.fixture_fuzz", description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=500)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    started = time.perf_counter()
    outcomes, failures = run(args.files, args.seed)
    print(f"fixture_fuzz: {args.files} mutated fixture files (seed {args.seed}) from {ROOT / 'policies'}, "
          f"{time.perf_counter() - started:.1f} s; cases: {dict(outcomes)}")
    for failure in failures:
        print(f"{failure['file']}: {failure['message']}")
    print(f"failures: {len(failures)}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
