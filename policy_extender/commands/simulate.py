"""``policy-extender simulate``: what Volcano's own scheduler would do (docs/testing-policies.md,
"Simulate").

``simulate --recording DIR --policies CANDIDATE [--against CURRENT]`` rebuilds the cluster of each
recorded cycle from its onSessionOpen snapshot, runs Volcano's scheduler (its real actions and
plugins, the extender plugin calling a real ``serve``) once with the current set and once with the
candidate, and prints what changes: binds moved, evictions added or gone, tasks pipelined
elsewhere, jobs admitted or held. Exit status 0 nothing changed, 1 something changed, 2 error.

``simulate CASE.yaml [--policies DIR]`` runs a hand-written cluster (an outcome case's keys:
cluster, cycles, events, policies, conf, actions; its name and expect are not compared) and prints
each cycle's outcome with what ``why`` says; with ``--against DIR`` it prints the difference
instead, with the same exit status.

``--values FILE`` makes each policy directory and the cluster's values file one set
(``policyset.sets.policy_set_source``), as serve loads them with ``values_file``. The engine is the
outcome cases' (``fixture_runner.engine``: found or built in one place).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from dataclasses import asdict, dataclass

HELP = "run Volcano's own scheduler on a recorded or hand-written cluster and show what a policy change does"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from policy_extender.fixture_runner.engine import SUPPORTED
    parser.add_argument("case", nargs="?", metavar="CASE.yaml",
                        help="a hand-written cluster (an outcome case's keys: cluster, cycles, events, ...); or use --recording")
    parser.add_argument("--recording", metavar="DIR", help="a directory written by serve --record "
                        "(or one cycle directory of it): every recorded cycle is simulated")
    parser.add_argument("--policies", default="policies", metavar="DIR",
                        help="the candidate policy directory (default: policies)")
    parser.add_argument("--against", metavar="DIR", help="the current policy directory to compare "
                        "with (required with --recording: the recording holds the answers, not the policies)")
    parser.add_argument("--cycle", metavar="TEXT", help="with --recording: only the cycles whose "
                        "directory name contains TEXT")
    parser.add_argument("--scheduler-conf", metavar="FILE", help="the scheduler conf Volcano runs "
                        "with (default: the case's conf, else docker/k8s/sidecar/volcano-scheduler.conf)")
    parser.add_argument("--actions", metavar="LIST", help='replaces the conf\'s actions ("enqueue, allocate")')
    parser.add_argument("--volcano", default=SUPPORTED[0], metavar="vX.Y.Z",
                        help=f"the Volcano release to run (default {SUPPORTED[0]}; {', '.join(SUPPORTED)})")
    parser.add_argument("--values", metavar="FILE", help="the cluster's values file (its name ends in "
                        "values.yaml): each policy directory and FILE are one set, as serve loads them with "
                        "values_file (the current set's and the candidate's)")
    parser.add_argument("--json", action="store_true", help="print the outcomes and changes as JSON")


def run(args: argparse.Namespace) -> int:
    from policy_extender.fixture_runner.engine import EngineError, EngineUnavailable  # lazy: commands/__init__
    from policy_extender.policyset.files import ReadError
    try:
        if args.recording and args.case:
            raise ValueError("give a CASE.yaml or --recording DIR, not both")
        if args.recording:
            return _simulate_recording(args)
        if args.case:
            return _simulate_case(args)
        raise ValueError("give a CASE.yaml to run, or --recording DIR --against CURRENT --policies CANDIDATE")
    except (EngineError, EngineUnavailable, ReadError, ValueError, OSError) as error:
        print(f"policy-extender simulate: {error}", file=sys.stderr)
        return 2


# -- the difference of two outcomes -------------------------------------------------------------

@dataclass(frozen=True)
class OutcomeChange:
    """One difference between the current set's outcome and the candidate's."""

    kind: str      # bind, eviction, pipelined, job, panic
    subject: str   # ns/pod or ns/job
    before: str    # "" when absent
    after: str
    text: str


def diff_outcomes(before: dict, after: dict) -> list[OutcomeChange]:
    """What changed from one cycle's outcome (the engine's JSON) to another's."""
    changes: list[OutcomeChange] = []
    changes += _placements("bind", before.get("binds") or {}, after.get("binds") or {})
    gone_before, gone_after = set(before.get("evictions") or []), set(after.get("evictions") or [])
    for pod in sorted(gone_after - gone_before):
        changes.append(OutcomeChange("eviction", pod, "", "evicted", "now evicted"))
    for pod in sorted(gone_before - gone_after):
        changes.append(OutcomeChange("eviction", pod, "evicted", "", "no longer evicted"))
    changes += _placements("pipelined", before.get("pipelined") or {}, after.get("pipelined") or {})
    phases_before, phases_after = before.get("phases") or {}, after.get("phases") or {}
    for job in sorted(set(phases_before) | set(phases_after)):
        was, now = phases_before.get(job, ""), phases_after.get(job, "")
        if was != now:
            changes.append(OutcomeChange("job", job, was, now, _phase_text(was, now)))
    if (before.get("panic") or "") != (after.get("panic") or ""):
        changes.append(OutcomeChange("panic", "scheduler", before.get("panic") or "", after.get("panic") or "",
                              f"Volcano panics: {after['panic']}" if after.get("panic")
                              else "Volcano no longer panics"))
    return changes


def _placements(kind: str, before: dict, after: dict) -> list[OutcomeChange]:
    verb, where = ("bound", "to") if kind == "bind" else ("pipelined", "on")
    out = []
    for pod in sorted(set(before) | set(after)):
        was, now = before.get(pod, ""), after.get(pod, "")
        if was == now:
            continue
        if was and now:
            text = f"{was} -> {now}"
        elif now:
            text = f"now {verb} {where} {now} (was not {verb})"
        else:
            text = f"no longer {verb} (was {was})"
        out.append(OutcomeChange(kind, pod, was, now, text))
    return out


def _phase_text(was: str, now: str) -> str:
    if was == "Pending" and now not in ("", "Pending"):
        return f"admitted ({was} -> {now})"
    if now == "Pending" and was not in ("", "Pending"):
        return f"held ({was} -> {now})"
    return f"PodGroup phase {was or '(none)'} -> {now or '(none)'}"


def changes_text(changes: list[OutcomeChange], indent: str = "  ") -> str:
    width = max((len(c.subject) for c in changes), default=0)
    return "\n".join(f"{indent}{c.kind:<10} {c.subject:<{width}}  {c.text}" for c in changes)


# -- --recording ---------------------------------------------------------------------------------

def _simulate_recording(args: argparse.Namespace) -> int:
    from policy_extender.fixture_runner.engine import simulate as run_engine
    if not args.against:
        raise ValueError("--recording needs --against CURRENT: the policy directory the recording was "
                         "answered by (the recording keeps its version, not its files)")
    current = _checked_set(args.against, "current", args.values)
    _checked_set(args.policies, "candidate", args.values)
    cycles, problems = _recorded_opens(args.recording, args.cycle)
    for problem in problems:
        print(f"policy-extender simulate: {problem}", file=sys.stderr)
    if not cycles:
        which = f" whose name contains {args.cycle!r}" if args.cycle else ""
        raise ValueError(f"{args.recording}: no recorded cycle{which} with an onSessionOpen snapshot; "
                         "record one with `policy-extender serve --record DIR`")
    report = []
    with tempfile.TemporaryDirectory(prefix="policy-extender-simulate-") as tmp:
        served_current = _served(args.against, args.values, os.path.join(tmp, "current"))
        served_candidate = _served(args.policies, args.values, os.path.join(tmp, "candidate"))
        for name, body, versions, recorded in cycles:
            snapshot = os.path.join(tmp, f"{name}.json")
            with open(snapshot, "wb") as out:
                out.write(body)
            options = dict(scheduler_conf=args.scheduler_conf, actions=args.actions)
            before = run_engine(args.volcano, snapshot, served_current, **options)["cycles"][0]
            after = run_engine(args.volcano, snapshot, served_candidate, **options)["cycles"][0]
            notes = []
            if recorded is not None and recorded != {**before["pipelined"], **before["binds"]}:
                notes.append(f"the recorded cycle placed {_placed(recorded)} (its allocateFunc and "
                             f"deallocateFunc calls); run again with {args.against} Volcano places "
                             f"{_placed({**before['pipelined'], **before['binds']})}: the scheduler conf "
                             "(--scheduler-conf), the release (--volcano) or what the snapshot does not "
                             "carry differs, so read the changes with that in mind")
            if versions and current[1] not in versions:
                notes.append(f"the recording was answered by policy version {', '.join(sorted(versions))}; "
                             f"{args.against} is version {current[1]}: the comparison is with that set, "
                             "not with the recorded one")
            report.append((name, before, after, diff_outcomes(before, after), notes))
    total = sum(len(entry[3]) for entry in report)
    against = f"{args.against} -> {args.policies}"
    if args.json:
        print(json.dumps({"volcano": args.volcano, "against": args.against, "policies": args.policies,
                          "cycles": [{"cycle": name, "current": before, "candidate": after, "notes": notes,
                                      "changes": [asdict(c) for c in changes]}
                                     for name, before, after, changes, notes in report],
                          "total": total}, indent=2))
    else:
        for name, _, _, changes, notes in report:
            print(f"cycle {name}: {len(changes)} change{'s' * (len(changes) != 1)}")
            for note in notes:
                print(f"  note: {note}")
            if changes:
                print(changes_text(changes))
        print(f"simulated {len(report)} cycle{'s' * (len(report) != 1)} with Volcano {args.volcano} "
              f"({against}): {total} change{'s' * (total != 1)}")
    return 1 if total else 0


def _checked_set(directory: str, role: str, values: str | None = None) -> tuple[str, str]:
    """The directory and the version of a policy set that compiles (its diagnostics otherwise):
    the directory with the values file, as serve loads them (``policyset.sets``)."""
    from policy_extender.errors import PolicyError
    from policy_extender.policyset.sets import load_set, policy_set_source
    if not os.path.isdir(directory):
        raise ValueError(f"{directory}: no such {role} policy directory")
    source = policy_set_source([directory], values)
    try:
        return directory, load_set(source).version
    except PolicyError as error:
        raise ValueError(f"the {role} policies in {source.describe()} do not compile; fix them and "
                         f"simulate again:\n{error.render()}") from None


def _served(directory: str | None, values: str | None, copy: str) -> str | None:
    """The directory the engine's serve reads: ``directory`` itself, or, with a values file, a
    copy of the set ``policy_set_source([directory], values)`` names (the engine serves every
    policy and values file of one directory)."""
    from policy_extender.policyset.sets import policy_set_source, read_set
    if not values or directory is None:
        return directory
    os.makedirs(copy)
    for name, text in read_set(policy_set_source([directory], values)).items():
        with open(os.path.join(copy, name), "w", encoding="utf-8") as out:
            out.write(text)
    return copy


def _recorded_opens(directory: str, pattern: str | None) -> tuple[list, list[str]]:
    """Each recorded cycle's name, onSessionOpen body, the policy versions that answered it and
    where it placed tasks (recorded_placements)."""
    from policy_extender.replay.reading import Problem, cycle_dirs, read_cycle
    if not os.path.isdir(directory):
        raise ValueError(f"{directory}: no such recording directory; record one with "
                         "`policy-extender serve --record DIR`")
    problems: list[Problem] = []
    out = []
    for path in cycle_dirs(directory):
        if pattern and pattern not in os.path.basename(os.path.normpath(path)):
            continue
        cycle = read_cycle(path, problems)
        if not cycle.opens:
            continue
        versions = {call.policy_version for call in cycle.calls if call.policy_version}
        out.append((cycle.name, cycle.calls[0].request, versions, recorded_placements(cycle.calls)))
    return out, [str(p) for p in problems]


def recorded_placements(calls) -> dict[str, str] | None:
    """Where a recorded cycle placed tasks (bound or pipelined: Volcano sends allocateFunc for
    both), from its allocateFunc and deallocateFunc calls in order: each adds or takes back one
    placement of a task (an eviction is a deallocateFunc, its undoing an allocateFunc). None when
    the cycle has no such call (Volcano before v1.13 sends none)."""
    from policy_extender.verb_names.volcano import ALLOCATE, DEALLOCATE
    count: dict[str, int] = {}
    node: dict[str, str] = {}
    seen = False
    for call in calls:
        if call.verb not in (ALLOCATE, DEALLOCATE) or call.status != 200:
            continue
        seen = True
        try:
            task = json.loads(call.request).get("task") or {}
        except ValueError:
            continue
        key = f"{task.get('Namespace')}/{task.get('Name')}"
        count[key] = count.get(key, 0) + (1 if call.verb == ALLOCATE else -1)
        if call.verb == ALLOCATE:
            node[key] = task.get("NodeName") or ""
    return {key: node[key] for key in sorted(count) if count[key] > 0} if seen else None


def _placed(placements: dict[str, str]) -> str:
    return ", ".join(f"{pod} on {node}" for pod, node in sorted(placements.items())) or "nothing"


# -- CASE.yaml -----------------------------------------------------------------------------------

def _simulate_case(args: argparse.Namespace) -> int:
    from policy_extender.fixture_runner.engine import simulate as run_engine
    if not os.path.isfile(args.case):
        raise ValueError(f"{args.case}: no such case file")
    policies = args.policies if os.path.isdir(args.policies) else None
    if args.policies != "policies" and policies is None:
        raise ValueError(f"{args.policies}: no such policy directory")
    if args.values and policies is None:
        raise ValueError(f"--values {args.values}: give the policy directory it goes with (--policies DIR)")
    options = dict(scheduler_conf=args.scheduler_conf, actions=args.actions)
    with tempfile.TemporaryDirectory(prefix="policy-extender-simulate-") as tmp:
        return _run_case(args, run_engine, options, _served(policies, args.values, os.path.join(tmp, "candidate")),
                         _served(args.against, args.values, os.path.join(tmp, "current")))


def _run_case(args: argparse.Namespace, run_engine, options: dict, policies: str | None, current: str | None) -> int:
    if args.against:
        _checked_set(args.against, "current", args.values)
        before = run_engine(args.volcano, args.case, current, **options)
        after = run_engine(args.volcano, args.case, policies, **options)
        per_cycle = [diff_outcomes(b, a) for b, a in zip(before["cycles"], after["cycles"])]
        total = sum(map(len, per_cycle))
        if args.json:
            print(json.dumps({"volcano": args.volcano, "current": before, "candidate": after,
                              "changes": [[asdict(c) for c in cs] for cs in per_cycle]}, indent=2))
        else:
            for i, changes in enumerate(per_cycle, 1):
                print(f"cycle {i}: {len(changes)} change{'s' * (len(changes) != 1)}")
                if changes:
                    print(changes_text(changes))
            print(f"{args.case} with Volcano {args.volcano} ({args.against} -> {args.policies}): "
                  f"{total} change{'s' * (total != 1)}")
        return 1 if total else 0
    outcome = run_engine(args.volcano, args.case, policies, **options)
    print(json.dumps(outcome, indent=2) if args.json else outcome_text(outcome, args.case))
    return 0


def outcome_text(outcome: dict, name: str) -> str:
    """A case's outcome: each cycle's binds, evictions, pipelined tasks and phases, then why."""
    lines = [f"{name} with Volcano {outcome['release']}"]
    for i, cycle in enumerate(outcome["cycles"], 1):
        parts = [f"bound {pod} -> {node}" for pod, node in sorted(cycle["binds"].items())]
        parts += [f"evicted {pod}" for pod in sorted(cycle["evictions"])]
        parts += [f"pipelined {pod} on {node}" for pod, node in sorted(cycle["pipelined"].items())]
        if cycle.get("panic"):
            parts.append(f"Volcano panicked (the scheduler would crash): {cycle['panic']}")
        lines.append(f"cycle {i}:")
        lines += [f"  {part}" for part in parts or ["nothing bound, evicted or pipelined"]]
        phases = ", ".join(f"{job} {phase}" for job, phase in sorted(cycle["phases"].items()))
        if phases:
            lines.append(f"  PodGroups: {phases}")
    for name, text in sorted((outcome.get("why") or {}).items()):
        lines.append(f"why {name}:")
        lines += [f"  | {line}" for line in text.splitlines()] or ["  | (nothing)"]
    return "\n".join(lines)
