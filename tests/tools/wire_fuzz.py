"""``python -m tests.tools.wire_fuzz --bodies 20000 --seed 7``: mutated Volcano bodies of every
verb through the verb handlers, with every bundled policy, in and out of a session.
``--served``: the same kind of bodies (opens, predicates, prioritizes) to a real ``serve`` and to
the handlers here, in the same order; every answer must be the same (``served_differences``).

Each body is a real-shaped sample (``tests/samples``, the compact copy of ``../shared/samples``) with 1-4 values at random paths replaced
by a value of another type or range (null, strings, quantities like ``"1e999999999"``, 2**70,
1e308, lists, maps) or deleted, and one body in ten then truncated or with one byte replaced.
Every 200th body is an onSessionOpen (every other one of them intact), so the rest run in and out
of a session. What must hold for every body: the answer is JSON (read as Go reads it: bytes that
are not UTF-8, echoed from a request that had them, are U+FFFD), and it is not a 500 unless the
policies' ``require_session`` refusal (``decision == "no_session"``) or a run-time bound of the
language (E510-E512, answered 500 by design: docs/language.md) made it one; any other 500 is a
failure while deciding (a bug), which Volcano can only ignore or fail on. The failures are
printed with the body that caused them; the exit status is 1 when there is one.
"""

from __future__ import annotations

import argparse
import collections
import copy
import json
import logging
import random
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Iterator

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "tests" / "samples"  # the repository's copy of ../shared/samples (tests/__init__.py)
OPEN, CLOSE = "onSessionOpen", "onSessionClose"

#: replacement values: other types, other ranges, quantities past what Kubernetes keeps
ODD_VALUES: tuple[Any, ...] = (
    None, "", "x", 0, -1, 1.5, 2**70, -2**70, True, False, [], {}, [1], {"a": 1}, 1e308,
    "1e400", "-1e400", "1e999999999", "9" * 5000, "4Gi", "\u0000", "\ud7ff")
DELETE = object()


def _paths(value: Any, path: tuple = ()) -> Iterator[tuple]:
    yield path
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _paths(item, path + (key,))
    elif isinstance(value, list):
        for index, item in enumerate(value[:3]):
            yield from _paths(item, path + (index,))


def _set(document: Any, path: tuple, value: Any) -> None:
    for step in path[:-1]:
        document = document[step]
    if value is DELETE and isinstance(document, dict):
        del document[path[-1]]
    else:
        document[path[-1]] = None if value is DELETE else value


def mutate(body: Any, rng: random.Random) -> bytes:
    """``body`` with 1-4 values replaced or deleted, as JSON; one in ten then cut or with a byte changed."""
    document = copy.deepcopy(body)
    for _ in range(rng.randint(1, 4)):
        paths = [path for path in _paths(document) if path]
        if not paths:
            break
        value = rng.choice(ODD_VALUES + (DELETE,))
        _set(document, rng.choice(paths), value if value is DELETE else copy.deepcopy(value))
    raw = json.dumps(document).encode()
    roll = rng.random()
    if roll < 0.05:
        raw = raw[:rng.randint(0, len(raw))]
    elif roll < 0.1:
        at = rng.randrange(len(raw))
        raw = raw[:at] + bytes([rng.randrange(256)]) + raw[at + 1:]
    return raw


def run(bodies: int, seed: int, policy_dir: Path = ROOT / "policies") -> tuple[collections.Counter, list[dict]]:
    """(answers per (verb, status), failures) of ``bodies`` mutated bodies from ``seed``."""
    from policy_extender.config import Config
    from policy_extender.decide.handlers import respond
    from policy_extender.web import create_app

    samples = {path.stem: json.loads(path.read_text()) for path in sorted(SAMPLES.glob("*.json"))}
    verbs = [verb for verb in samples if verb not in (OPEN, CLOSE)]
    rng = random.Random(seed)
    answers: collections.Counter = collections.Counter()
    failures: list[dict] = []
    with tempfile.TemporaryDirectory() as tmp:
        app = create_app(Config(policy_dirs=(str(policy_dir),), session_store=f"sqlite:{tmp}/s.sqlite3",
                                reload_interval=0.0, log_level="critical"))
        service = app.extensions["policy_extender"]
        try:
            for n in range(bodies):
                if n % 200 == 0:
                    verb = OPEN
                    raw = json.dumps(samples[OPEN]).encode() if n % 400 == 0 else mutate(samples[OPEN], rng)
                else:
                    verb = rng.choice(verbs)
                    raw = mutate(samples[verb], rng)
                reply = respond(service, verb, raw)
                answers[(verb, reply.status)] += 1
                problem = None
                try:  # as Go's decoder reads it: bytes that are not UTF-8 are U+FFFD (docs/reliability.md, 6)
                    json.loads(reply.body.decode(errors="replace"))
                except ValueError as exc:
                    problem = f"the answer is not JSON: {exc}"
                if reply.status == 500 and reply.decision != "no_session" and not _bound(reply.body):
                    problem = "a 500"
                if problem:
                    failures.append({"verb": verb, "problem": problem, "status": reply.status,
                                     "answer": reply.body[:400].decode(errors="replace"),
                                     "body": raw[:2000].decode(errors="replace")})
        finally:
            service.stop()
    return answers, failures


def served_differences(bodies: int, seed: int, policy_dir: Path = ROOT / "policies") -> tuple[collections.Counter, list[dict], str]:
    """Mutated onSessionOpen, predicate and prioritize bodies (one in three an open) sent to a real
    ``serve`` (2 gunicorn workers, where an open is decoded while it arrives: ``wire.open_stream``,
    and predicates reuse the nodes a worker kept) and to the handlers in this process (the whole
    body decoded at once), in the same order: (answers per (verb, served status), the bodies whose
    answers differ in status or content or were a 500 other than a language bound, the server's
    log)."""
    import http.client

    from policy_extender.config import Config
    from policy_extender.decide.handlers import respond
    from policy_extender.web import create_app
    from tests.support.volcano import Server

    samples = {verb: json.loads((SAMPLES / f"{verb}.json").read_text()) for verb in (OPEN, "predicate", "prioritize")}
    rng = random.Random(seed)
    answers: collections.Counter = collections.Counter()
    differences: list[dict] = []
    with tempfile.TemporaryDirectory() as tmp:
        server = Server(Path(tmp), policy_dir, workers=2, threads=4)
        app = create_app(Config(policy_dirs=(str(policy_dir),), session_store=f"sqlite:{tmp}/here.sqlite3",
                                reload_interval=0.0, log_level="critical"))
        service = app.extensions["policy_extender"]
        try:
            server.wait_ready()
            for n in range(bodies):
                verb = OPEN if n % 3 == 0 else rng.choice(["predicate", "prioritize"])
                raw = mutate(samples[verb], rng)
                connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
                connection.request("POST", f"/{verb}", raw, {"Content-Type": "application/json"})
                response = connection.getresponse()
                served = response.read()
                connection.close()
                here = respond(service, verb, raw)
                answers[(verb, response.status)] += 1
                failed = response.status == 500 and not _bound(served)  # the same 500 here is no excuse
                if failed or response.status != here.status or json.loads(served) != json.loads(here.body):
                    differences.append({"verb": verb, "served": [response.status, served[:400].decode(errors="replace")],
                                        "here": [here.status, here.body[:400].decode(errors="replace")],
                                        "body": raw[:2000].decode(errors="replace")})
        finally:
            service.stop()
            server.stop()
        log = server.log()
    return answers, differences, log


def _bound(answer: bytes) -> bool:
    """A 500 from a run-time bound of the language (E510 a number past 2^63, E511, E512): by
    design, so that ``extender.ignorable`` decides (docs/language.md), e.g. ``10 * free_gpu`` on
    a node whose idle GPUs are 2**70 milli."""
    return b"failed: EvalError: " in answer and re.search(rb"error\[E51[0-3]\]", answer) is not None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.tools.wire_fuzz", description=__doc__.splitlines()[0])
    parser.add_argument("--bodies", type=int, default=5000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--served", action="store_true",
                        help="compare a real serve (bodies decoded while they arrive) with the handlers here")
    args = parser.parse_args(argv)
    logging.disable(logging.CRITICAL)  # the 400s and the session gaps are logged by design
    started = time.perf_counter()
    if args.served:
        answers, found, log = served_differences(args.bodies, args.seed)
        what = "a real serve against the handlers in this process"
        tail = f"differences: {len(found)}; tracebacks in the server's log: {log.count('Traceback')}"
    else:
        answers, found = run(args.bodies, args.seed)
        what = f"through the verb handlers with {ROOT / 'policies'}"
        tail = f"failures: {len(found)}"
    print(f"wire_fuzz{' --served' if args.served else ''}: {args.bodies} mutated bodies (seed {args.seed}), "
          f"{what}, {time.perf_counter() - started:.1f} s")
    for (verb, status), count in sorted(answers.items()):
        print(f"  {verb:16s} {status}: {count}")
    for each in found:
        print(json.dumps(each))
    print(tail)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
