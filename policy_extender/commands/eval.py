"""``policy-extender eval [FILE|-] --verb VERB --policies DIR``: decide one raw request body.

The body (a file, or stdin with ``-``) goes through the service's own decode → decide → encode;
the command prints the decision, why, and the exact answer the service would send.
"""

from __future__ import annotations

import argparse
import difflib
import json
import sys
from pathlib import Path

HELP = "decide one raw Volcano request body with a policy directory and print the decision and why"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("body", nargs="?", default="-", metavar="FILE|-",
                        help="the request body as Volcano sends it (default: - for stdin)")
    parser.add_argument("--verb", required=True,
                        help="a deciding verb, by its Volcano name (predicate, prioritize, ...) or its "
                             "decision name (filter, score, ...); an unknown name lists them all")
    parser.add_argument("--policies", default="policies", metavar="DIR", help="directory of *.policy files (default: policies)")
    parser.add_argument("--session", metavar="FILE", help="an onSessionOpen body to decide within (default: no session)")
    parser.add_argument("--json", action="store_true", help="print the decision as JSON")


def run(args: argparse.Namespace) -> int:
    from policy_extender.decide.table import DECIDING, verb_named  # lazy: commands/__init__
    from policy_extender.fixture_runner import exchange  # lazy: commands/__init__
    found = verb_named(args.verb)
    if found is None:
        print(f"policy-extender eval: unknown verb {args.verb!r}{_did_you_mean(args.verb)}: "
              f"use one of {', '.join(DECIDING)}", file=sys.stderr)
        return 2
    verb = found.name
    try:
        return _decide(args, verb, exchange)
    except (exchange.CaseError, OSError) as error:
        print(f"policy-extender eval: {_describe(error)}", file=sys.stderr)
        return 1


def _decide(args, verb: str, exchange) -> int:
    from policy_extender.fixture_runner import outcome  # lazy: commands/__init__
    policy_set = exchange.compile_files((Path(args.policies),))
    if not policy_set.sources:
        raise OSError(2, f"no *.policy files in {args.policies}", args.policies)
    exchanger = exchange.Exchanger(policy_set)
    body = _read_body(args.body)
    if args.session:
        exchanger.open_session(Path(args.session).read_bytes())
    decision, response = exchanger.exchange(verb, body)
    explanation = outcome.explanation(policy_set, decision, response)
    if args.json:
        print(json.dumps({"verb": verb, "policy_version": policy_set.version, "response": response,
                          "decision": _plain(decision), "explanation": explanation}, indent=2, default=str))
    else:
        print(f"{verb}: {json.dumps(response)}\n{explanation}")
    return 0


def _did_you_mean(word: str) -> str:
    """`` (did you mean 'prioritize'?)`` for the closest verb or decision name, case aside."""
    from policy_extender.decide.table import BY_DECISION, DECIDING  # lazy: commands/__init__
    names = {name.lower(): name for name in (*DECIDING, *BY_DECISION)}
    close = difflib.get_close_matches(word.lower(), list(names), n=1, cutoff=0.6)
    return f" (did you mean {names[close[0]]!r}?)" if close else ""


def _read_body(source: str) -> bytes:
    return sys.stdin.buffer.read() if source == "-" else Path(source).read_bytes()


def _describe(error: Exception) -> str:
    if isinstance(error, OSError):
        return f"{error.filename}: {error.strerror}"
    return str(error)


def _plain(decision) -> dict:
    fields = getattr(decision, "__dataclass_fields__", {}) or getattr(decision, "_fields", ())
    return {name: getattr(decision, name) for name in fields}
