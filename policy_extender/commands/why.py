"""``policy-extender why NS/NAME --url URL``: why is this job or task pending, in plain lines.

Asks a running service's ``GET /why`` (docs/operations.md, "Why is it pending?") about ``NS/NAME``
as a job (with the tasks named ``NAME-...``) and as a task, or with ``--queue`` about a queue, and
prints what the decision tally holds for the most recent cycle that decided anything about it
(``--all``: every kept cycle), e.g.::

    cycle 5f0c2a... (open, opened 2026-11-22 15:30:12Z)
    job ml/train-7: enqueue rejected by gpu-cap (queue-cap.policy:4): job asks 24 GPUs, the limit is 16 (3 answers)
    task ml/train-7-0: 0 of 50 nodes fit: 31 zone-affinity (zone.policy:2): ...; 19 gpu-pack-fits (...)

Exit status: 0 when something was found, 1 when the kept cycles hold nothing about it, 2 when the
service cannot be asked.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

from policy_extender.decide import kube_table, tally_shapes
from policy_extender.decide.table import SHAPES as VOLCANO_SHAPES

HELP = "why is a job, task or queue pending: what the running service decided about it, by rule, in the last cycles"

#: bytes read of one /why answer at most
MAX_ANSWER = 16 * 1024 * 1024


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name", metavar="NS/NAME",
                        help="a job or task as NAMESPACE/NAME (a queue's NAME with --queue)")
    parser.add_argument("--url", default="http://127.0.0.1:8713",
                        help="the service's base URL (default http://127.0.0.1:8713, the sidecar)")
    parser.add_argument("--queue", action="store_true", help="NAME is a queue")
    parser.add_argument("--all", action="store_true", help="every kept cycle, not only the latest with data")
    parser.add_argument("--json", action="store_true", help="print /why's JSON answers as they are")
    parser.add_argument("--timeout", type=float, default=10.0, help="seconds to wait for the service (default 10)")


def run(args: argparse.Namespace) -> int:
    if args.queue:
        queries = [("queue", args.name)]
    elif args.name.count("/") == 1 and all(args.name.split("/")):
        queries = [("job", args.name), ("task", args.name)]
    else:
        print(f"policy-extender why: {args.name!r} is not NAMESPACE/NAME (e.g. ml/train-7); for a queue "
              "add --queue", file=sys.stderr)
        return 2
    answers = []
    for kind, name in queries:
        try:
            answers.append(fetch(args.url, kind, name, args.timeout))
        except WhyError as error:
            print(f"policy-extender why: {error}", file=sys.stderr)
            return 2
    if args.json:
        for answer in answers:
            print(json.dumps(answer, indent=2, sort_keys=True))
        return 0 if any(has_data(a) for a in answers) else 1
    lines = render(answers, every_cycle=args.all)
    if not lines:
        what = "queue" if args.queue else "job or task"
        kept = answers[0].get("tally", {}).get("cycles_kept", "?")
        print(f"nothing decided about {what} {args.name} in the open cycle or the {kept} kept closed ones "
              "(is the name right? was it considered this cycle? the tally lags by its flush interval)")
        return 1
    print("\n".join(lines))
    return 0


class WhyError(Exception):
    pass


def fetch(url: str, kind: str, name: str, timeout: float) -> dict:
    target = url.rstrip("/") + "/why?" + urllib.parse.urlencode({kind: name})
    try:
        with urllib.request.urlopen(target, timeout=timeout) as response:
            return json.loads(response.read(MAX_ANSWER))
    except urllib.error.HTTPError as error:
        try:
            message = json.loads(error.read(MAX_ANSWER)).get("error", "")
        except ValueError:
            message = ""
        raise WhyError(f"{target} answered {error.code}: {message or error.reason}") from None
    except (urllib.error.URLError, OSError) as error:
        reason = getattr(error, "reason", error)
        raise WhyError(f"cannot reach {target}: {reason} (is the service running there? give its "
                       "address with --url)") from None
    except ValueError as error:
        raise WhyError(f"{target} did not answer JSON: {error}") from None


def has_data(answer: dict) -> bool:
    return any(_cycle_has_data(c) for c in answer.get("cycles", []))


#: the tally shapes of both verb tables (Volcano's, kube-scheduler's), as the service's tally has them
SHAPES = VOLCANO_SHAPES + kube_table.SHAPES
#: the keys of a /why cycle that say something was decided (the verb tables' tally shapes)
DECIDED_KEYS = tally_shapes.shown_keys(SHAPES)


def _cycle_has_data(cycle: dict) -> bool:
    return any(k in cycle for k in DECIDED_KEYS) or bool(cycle.get("tasks")) or bool(cycle.get("job"))


def render(answers: list[dict], every_cycle: bool = False) -> list[str]:
    """Lines for people: per cycle (the newest with data, or all), each object's answers."""
    by_cycle: dict[str, list[tuple[str, str, dict]]] = {}
    order: list[tuple[str, dict]] = []
    for answer in answers:
        kind = next(k for k in ("task", "job", "queue") if k in answer)
        for cycle in answer.get("cycles", []):
            if cycle["cycle"] not in by_cycle:
                by_cycle[cycle["cycle"]] = []
                order.append((cycle["cycle"], cycle))
            if _cycle_has_data(cycle):
                by_cycle[cycle["cycle"]].append((kind, answer[kind], cycle))
    order.sort(key=lambda item: -item[1]["opened_at"])
    lines: list[str] = []
    for cycle_id, cycle in order:
        entries = by_cycle[cycle_id]
        if not entries:
            continue
        opened = time.strftime("%Y-%m-%d %H:%M:%SZ", time.gmtime(cycle["opened_at"]))
        lines.append(f"cycle {cycle_id} ({'open' if cycle['open'] else 'closed'}, opened {opened})")
        for kind, name, data in entries:
            if data.get("podgroup"):  # found under Volcano's PodGroup name, "<job>-<job UID>"
                name = f"{name} (PodGroup {data['podgroup']})"
            lines += describe(kind, name, data)
            for task, task_data in (data.get("tasks") or {}).items():
                if not any(task == n for k, n, _ in entries if k == "task"):
                    lines += describe("task", task, task_data)
        if cycle.get("dropped_entries"):
            lines.append(f"  ({cycle['dropped_entries']} tally entries of this cycle were dropped over the "
                         "cap: tally_max_entries)")
        if not every_cycle:
            break
    return lines


def describe(kind: str, name: str, data: dict) -> list[str]:
    """The lines of one object in one cycle (each verb's, by its tally shape: decide/tally_shapes.py);
    a task's own, then its job's (``job``: what holds every task of the job, such as enqueue)."""
    found = tally_shapes.lines(SHAPES, kind, name, data)
    job = data.get("job") if kind == "task" else None
    if job:
        pod_group = f", PodGroup {job['podgroup']}" if job.get("podgroup") else ""
        found += tally_shapes.lines(SHAPES, "job", f"{job['name']} (the job of task {name}{pod_group})", job)
    return found
