"""``policy-extender eval [FILE|-] --verb VERB --policies DIR``: decide one raw request body.

The body (a file, or stdin with ``-``) goes through the service's own decode → decide → encode;
the command prints the decision, why, and the exact answer the service would send. A body of
kube-scheduler's (``ExtenderArgs``, ``ExtenderPreemptionArgs``: a ``Pod`` at the top) is decided by
its verbs with the set's kube-scheduler rules; ``--protocol`` says which scheduler sent it when
the body does not.
"""

from __future__ import annotations

import argparse
import difflib
import json
import sys
from pathlib import Path

HELP = "decide one raw Volcano or kube-scheduler request body with a policy directory and print the decision and why"

PROTOCOLS = ("volcano", "kube-scheduler")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("body", nargs="?", default="-", metavar="FILE|-",
                        help="the request body as Volcano or kube-scheduler sends it (default: - for stdin)")
    parser.add_argument("--verb", required=True,
                        help="a deciding verb, by its Volcano name (predicate, prioritize, ...), its "
                             "kube-scheduler name (filter, prioritize, preempt) or its decision name "
                             "(filter, score, ...); an unknown name lists them all")
    parser.add_argument("--protocol", choices=PROTOCOLS,
                        help="the scheduler that sent the body (default: kube-scheduler for a body with a "
                             "top-level Pod, else volcano)")
    parser.add_argument("--policies", default="policies", metavar="DIR", help="directory of *.policy files (default: policies)")
    parser.add_argument("--values", metavar="FILE", help="the values file of the set (the cluster's: "
                        "policyset.sets), read with the --policies directory")
    parser.add_argument("--session", metavar="FILE", help="an onSessionOpen body to decide within (default: no session)")
    parser.add_argument("--json", action="store_true", help="print the decision as JSON")


def run(args: argparse.Namespace) -> int:
    from policy_extender.decide.table import DECIDING, verb_named  # lazy: commands/__init__
    from policy_extender.fixture_runner import exchange, kube  # lazy: commands/__init__
    try:
        body = _read_body(args.body)
    except OSError as error:
        print(f"policy-extender eval: {_describe(error)}", file=sys.stderr)
        return 1
    protocol = args.protocol or _protocol_of(body)
    if protocol == kube.PROTOCOL:
        verb = _kube_verb(args.verb, kube)
        if verb is None:
            return 2
        if args.session:
            print("policy-extender eval: kube-scheduler has no session: drop --session", file=sys.stderr)
            return 2
    else:
        found = verb_named(args.verb)
        if found is None:
            print(f"policy-extender eval: unknown verb {args.verb!r}{_did_you_mean(args.verb)}: "
                  f"use one of {', '.join(DECIDING)}", file=sys.stderr)
            return 2
        verb = found.name
    try:
        return _decide(args, verb, body, exchange, kube.DECISIONS_BY_VERB.get(verb))
    except (exchange.CaseError, OSError) as error:
        print(f"policy-extender eval: {_describe(error)}", file=sys.stderr)
        return 1


def _decide(args, verb: str, body: bytes, exchange, kube_decision: str | None) -> int:
    from policy_extender.fixture_runner import kube, outcome  # lazy: commands/__init__
    policy_set = exchange.compile_files((Path(args.policies),), args.values)
    if not policy_set.sources:
        raise OSError(2, f"no *.policy files in {args.policies}", args.policies)
    exchanger = exchange.Exchanger(policy_set)
    if args.session:
        exchanger.open_session(Path(args.session).read_bytes())
    decision, response = exchanger.exchange(verb, body)
    if kube_decision is not None:
        explanation = kube.explanation(policy_set, kube_decision, decision, body)
    else:
        explanation = outcome.explanation(policy_set, decision, response)
    if args.json:
        print(json.dumps({"verb": verb, "policy_version": policy_set.version, "response": response,
                          "decision": _plain(decision), "explanation": explanation}, indent=2, default=str))
    else:
        print(f"{verb}: {json.dumps(response)}\n{explanation}")
    return 0


def _protocol_of(body: bytes) -> str:
    """kube-scheduler for its bodies (a JSON object with ``Pod``), else volcano."""
    try:
        document = json.loads(body)
    except ValueError:
        return "volcano"  # the verb's decoder says what is wrong with it
    return "kube-scheduler" if isinstance(document, dict) and "Pod" in document else "volcano"


def _kube_verb(word: str, kube) -> str | None:
    """kube-scheduler's verb kind for ``word``: its name (filter, prioritize, preempt), its kind,
    or the decision of the same name in either scheduler (``predicate`` is the filter)."""
    from policy_extender.decide.table import VERBS  # lazy: commands/__init__
    volcano = VERBS.get(word)
    name = kube.ALIASES.get(word) or (volcano.decision if volcano is not None else word)
    if name in kube.DECISIONS:
        return kube.DECISIONS[name].verb
    print(f"policy-extender eval: kube-scheduler has no verb {word!r}: use one of "
          f"{', '.join(kube.VERB_PATHS)} (the body has a top-level Pod: a kube-scheduler body; "
          "--protocol volcano if it is Volcano's)", file=sys.stderr)
    return None


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
