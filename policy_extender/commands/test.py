"""``policy-extender test [PATHS]``: run policy fixture files (``*.fixtures.yaml``).

``--values FILE`` is the values file of the sets of the fixture files (and cases) that name none
(``values:``; ``policyset.sets``). ``--watch`` runs again whenever a file under PATHS (fixtures,
policies, values) or the values file is saved, until Ctrl-C.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from policy_extender.commands import missing_paths

HELP = "run policy fixtures (*.fixtures.yaml): PASS/FAIL/ERROR per case, non-zero exit on any failure"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="*", default=["policies"], metavar="PATH",
                        help="fixture files or directories searched for *.fixtures.yaml (default: policies)")
    parser.add_argument("-k", dest="keyword", metavar="EXPR", help="run only cases whose name contains EXPR")
    parser.add_argument("--junit", metavar="FILE", help="also write a JUnit XML report to FILE")
    parser.add_argument("--json", action="store_true", help="print a JSON report instead of text")
    parser.add_argument("--coverage", action="store_true",
                        help="list rules never exercised and filters that never rejected")
    parser.add_argument("--fail-under", type=float, metavar="PCT",
                        help="exit non-zero when fewer than PCT%% of rules were exercised (implies --coverage)")
    parser.add_argument("--volcano", metavar="vX.Y.Z",
                        help="the Volcano release outcome cases run on (Volcano's own scheduler, built once per "
                             "release; default: the newest supported, or $POLICY_EXTENDER_VOLCANO)")
    parser.add_argument("--scheduler-conf", metavar="FILE",
                        help="the Volcano scheduler conf outcome cases run with, when neither the case (conf:) "
                             "nor its fixture file (scheduler_conf:) names one (default: "
                             "$POLICY_EXTENDER_SCHEDULER_CONF, else the shipped sidecar conf)")
    parser.add_argument("--no-outcomes", action="store_true",
                        help="run the answer cases only; outcome cases (cluster:) are reported SKIP")
    parser.add_argument("--values", metavar="FILE",
                        help="the values file of the set, for fixture files and cases that name none (values:)")
    parser.add_argument("--watch", action="store_true",
                        help="run again each time a fixture, policy or values file under PATHS is saved (Ctrl-C stops)")
    parser.add_argument("-q", "--quiet", action="store_true", help="print only failures, errors and the summary")


def run(args: argparse.Namespace) -> int:
    if missing_paths("test", [*args.paths, *([args.values] if args.values else [])]):
        return 2
    if args.watch:
        from policy_extender.fixture_runner.watch import watch  # lazy: commands/__init__
        try:
            watch([*args.paths, *([args.values] if args.values else [])], lambda: run_once(args))
        except KeyboardInterrupt:
            pass
        return 0
    return run_once(args)


def run_once(args: argparse.Namespace) -> int:
    """One run of the fixtures: print the report, write --junit, return the exit status."""
    from policy_extender.fixture_runner import reporters  # lazy: commands/__init__
    from policy_extender.fixture_runner.coverage import render
    from policy_extender.fixture_runner.results import ResultCounts
    from policy_extender.fixture_runner.engine import EngineUnavailable, choose_release
    from policy_extender.fixture_runner.outcome_run import OutcomeSettings
    from policy_extender.fixture_runner.runner import run_paths

    if missing_paths("test", args.paths) or missing_paths("test", [args.scheduler_conf] if args.scheduler_conf else []):
        return 2
    settings = OutcomeSettings.from_environment()
    try:
        settings.release = choose_release(args.volcano or settings.release)
    except EngineUnavailable as error:
        print(f"policy-extender test: --volcano: {error}", file=sys.stderr)
        return 2
    if args.scheduler_conf:
        settings.scheduler_conf = Path(args.scheduler_conf)
    if args.no_outcomes:
        settings.enabled = False
    result = run_paths(args.paths, args.keyword, settings, args.values)
    coverage = result.coverage.report() if (args.coverage or args.fail_under is not None) else None
    if args.junit:
        junit = Path(args.junit)
        junit.parent.mkdir(parents=True, exist_ok=True)  # out/junit.xml into a fresh checkout
        junit.write_bytes(reporters.junit_xml(result.results))
    _print(args, result.results, coverage, reporters, render)
    if not result.results:
        print("policy-extender test: no fixture cases found" + (f" matching -k {args.keyword!r}" if args.keyword else ""), file=sys.stderr)
        return 5
    return _exit_status(ResultCounts.of(result.results), coverage, args.fail_under)


def _print(args, results, coverage, reporters, render) -> None:
    if args.json:
        print(reporters.json_report(results, coverage))
        return
    for line in (reporters.text_line(r) for r in results if not (args.quiet and r.ok)):
        print(line)
    if coverage is not None:
        print(render(coverage))
    print(reporters.summary_line(results))


def _exit_status(tally, coverage: dict | None, fail_under: float | None) -> int:
    if not tally.ok:
        return 1
    if fail_under is not None and coverage["percent"] < fail_under:  # type: ignore[index]  # computed when fail_under is set
        print(f"policy-extender test: rule coverage {coverage['percent']}% is under --fail-under {fail_under}%", file=sys.stderr)  # type: ignore[index]  # as above
        return 1
    return 0
