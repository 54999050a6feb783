"""``policy-extender replay DIR --policies CANDIDATE``: re-run recorded cycles through a candidate
policy set and report what would change; ``--to-fixtures OUT`` turns recorded cases into fixture
files instead. Exit status: 0 no change, 1 changes, 2 errors (so it can gate a CI job).
"""

from __future__ import annotations

import argparse
import os
import sys

HELP = "replay recorded scheduling cycles through candidate policies and report what would change"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("recording", metavar="DIR", help="a directory written by serve --record "
                        "(or one cycle directory of it)")
    parser.add_argument("--policies", default="policies", metavar="DIR",
                        help="the candidate policy directory (default: policies)")
    parser.add_argument("--against", metavar="DIR", help="compare with this policy directory "
                        "replayed on the same calls, instead of with the recorded answers")
    parser.add_argument("--values", metavar="FILE", help="the values file of the sets replayed (the "
                        "recorded cluster's), read with --policies and --against (policyset.sets)")
    parser.add_argument("--score-threshold", type=float, default=10.0, metavar="N",
                        help="report a node's prioritize score when it moves by N or more (default 10)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--to-fixtures", metavar="OUT", help="write the recorded decisions as "
                        "*.fixtures.yaml files under OUT, expecting the --policies answers")
    parser.add_argument("-k", dest="keyword", metavar="EXPR", help="with --to-fixtures: only calls "
                        "whose 'verb task node' contains EXPR (case-insensitive)")


def run(args: argparse.Namespace) -> int:
    from policy_extender.errors import PolicyError  # lazy: commands/__init__
    try:
        _check_recording(args.recording)
        candidate = _compile(args.policies, "candidate", args.values)
        current = _compile(args.against, "current", args.values) if args.against else None
    except (PolicyError, OSError, ValueError) as error:
        print(f"policy-extender replay: {error}", file=sys.stderr)
        return 2
    if args.to_fixtures:
        return _to_fixtures(args, candidate)
    return _compare(args, candidate, current)


def _check_recording(directory: str) -> None:
    if not os.path.isdir(directory):
        raise ValueError(f"{directory}: no such recording directory; record one with "
                         "`policy-extender serve --record DIR`")


def _compile(directory: str, role: str, values: str | None = None):
    """The policy set of ``directory`` with ``values``; a PolicyError keeps its diagnostics, with context."""
    from policy_extender.errors import PolicyError  # lazy: commands/__init__
    from policy_extender.policyset import load_set, policy_set_source
    from policy_extender.policyset.files import ReadError
    if not os.path.isdir(directory):
        raise ValueError(f"{directory}: no such {role} policy directory")
    try:
        return load_set(policy_set_source([directory], values))
    except ReadError as error:
        raise ValueError(str(error)) from None
    except PolicyError as error:
        raise ValueError(f"the {role} policies in {directory} do not compile; fix them and "
                         f"replay again:\n{error.render()}") from None


def _compare(args: argparse.Namespace, candidate, current) -> int:
    from policy_extender.replay import diff, report  # lazy: commands/__init__
    from policy_extender.replay.comparison import compare_recording
    outcome = compare_recording(args.recording, candidate, current,
                                diff.Options(score_threshold=args.score_threshold))
    against = f"policies in {args.against}" if args.against else "the recorded answers"
    print(report.to_json(outcome, against) if args.json else report.to_text(outcome, against))
    if outcome.cycles == 0:
        print(f"policy-extender replay: {args.recording}: no replayable cycle found", file=sys.stderr)
        return 2
    return 1 if outcome.changes else 0


def _to_fixtures(args: argparse.Namespace, candidate) -> int:
    from policy_extender.replay.to_fixtures import write_fixtures  # lazy: commands/__init__
    written = write_fixtures(args.recording, candidate, args.policies, args.to_fixtures, args.keyword,
                             args.values)
    for problem in written.problems:
        print(f"problem: {problem}", file=sys.stderr)
    print(f"{written.cases} cases in {len(written.files)} fixture files under {args.to_fixtures}")
    return 0 if written.cases else 2
