"""CPU per predicate call of a rule over ``session.allocations``, at 40 and at 2,000 allocations,
with the index (``lang.compiler``: the aggregate reads one bucket) and without (the plain loop over
the whole list), and what one allocateFunc event then costs the next call (the cache's catch-up).

Method: the service's own WSGI app in one process (no sockets, no gunicorn), SQLite session store.
onSessionOpen with 100 jobs in 4 queues, then N allocateFunc events (tasks spread over 40 nodes
and the 100 jobs, half of them with a GPU), all through the service's handlers. Then predicate
calls of one task against the 40 nodes in turn, timed with the process CPU clock
(``time.process_time``) over ``--calls`` calls per round; rounds interleave the apps (indexed,
unindexed, counts-only), and the median round is reported. The unindexed app is the same policy
compiled with ``Compiler.indexed`` switched off. The counts-only app runs a rule on
``session.node.tasks`` (no list): the floor of a predicate call with a session rule. Catch-up:
after one more allocateFunc call (its CPU is reported too), the CPU of the predicate call that
applies the event minus that of the same call again, median over ``--events`` events.

``python -m bench.cpu.allocations [--calls N] [--rounds R] [--events E]``
"""

from __future__ import annotations

import argparse
import io
import json
import statistics
import tempfile
import time
from pathlib import Path

from bench.cpu.inprocess import close

RULE = ("filter gpu-per-node: count(a for a in session.allocations if a.job == task.job_id "
        "and a.node == node.name and a.requests.gpu > 0) < 2\n")
COUNTS_RULE = "filter node-cap: session.node.tasks < 1000000\n"
NODES, JOBS, QUEUES = 40, 100, 4


def environ(path: str, body: bytes) -> dict:
    return {"REQUEST_METHOD": "POST", "PATH_INFO": path, "CONTENT_TYPE": "application/json",
            "CONTENT_LENGTH": str(len(body)), "wsgi.input": io.BytesIO(body), "SERVER_NAME": "bench",
            "SERVER_PORT": "0", "wsgi.url_scheme": "http", "SERVER_PROTOCOL": "HTTP/1.1"}


def call(app, path: str, body: bytes) -> bytes:
    def start_response(status, headers, exc_info=None):
        if not status.startswith("200"):
            raise RuntimeError(f"{path} answered {status}")
    return b"".join(app(environ(path, body), start_response))


def _json(value) -> bytes:
    return json.dumps(value).encode()


def bodies(allocations: int) -> tuple[bytes, list[bytes], list[bytes]]:
    """(onSessionOpen, allocateFunc per allocation, predicate per node)."""
    from policy_extender.wire import compact
    jobs = [{"uid": f"ns/job-{j}", "queue": f"queue-{j % QUEUES}"} for j in range(JOBS)]
    queues = [{"name": f"queue-{q}"} for q in range(QUEUES)]
    open_body = _json(compact.session_body(jobs, queues, []))
    events = [_json(compact.allocate_body({"name": f"task-{k}", "job": f"ns/job-{k % JOBS}",
                                           "node_name": f"node-{k % NODES}",
                                           "requests": {"cpu": 1, "gpu": k % 2}}))
              for k in range(allocations)]
    predicates = [_json(compact.predicate_body({"name": "new-0", "job": "ns/job-7", "requests": {"gpu": 1}},
                                               {"name": f"node-{n}", "idle": {"gpu": 8}}))
                  for n in range(NODES)]
    return open_body, events, predicates


def make_app(tmp: Path, name: str, rule: str, indexed: bool = True):
    """The service's WSGI app on a policy directory holding ``rule``; compiled without the index
    when ``indexed`` is false (the closures keep what they were compiled with)."""
    from policy_extender.config import Config
    from policy_extender.lang import compiler
    from policy_extender.web import create_app
    directory = tmp / name
    directory.mkdir()
    (directory / "bench.policy").write_text(rule)
    real = compiler.Compiler.indexed
    if not indexed:
        compiler.Compiler.indexed = lambda self, node, slot: None
    try:
        return create_app(Config(policy_dirs=(str(directory),), session_store=f"sqlite:{directory}/s.sqlite3",
                                 reload_interval=0.0, log_level="warning")).wsgi_app
    finally:
        compiler.Compiler.indexed = real


def cpu_per_call(app, predicates: list[bytes], count: int) -> float:
    t0 = time.process_time()
    for k in range(count):
        call(app, "/predicate", predicates[k % len(predicates)])
    return (time.process_time() - t0) / count


def catch_up(app, predicates: list[bytes], events: int, first: int) -> tuple[float, float]:
    """Medians over ``events`` events of (CPU of one allocateFunc call, CPU of the predicate call
    after it, which applies the event, minus that of the same predicate call again)."""
    from policy_extender.wire import compact
    writes, applies = [], []
    for k in range(events):
        body = _json(compact.allocate_body({"name": f"extra-{first + k}", "job": f"ns/job-{k % JOBS}",
                                            "node_name": f"node-{k % NODES}", "requests": {"gpu": 1}}))
        predicate = predicates[k % len(predicates)]
        t0 = time.process_time()
        call(app, "/allocateFunc", body)
        t1 = time.process_time()
        call(app, "/predicate", predicate)
        t2 = time.process_time()
        call(app, "/predicate", predicate)
        t3 = time.process_time()
        writes.append(t1 - t0)
        applies.append((t2 - t1) - (t3 - t2))
    return statistics.median(writes), statistics.median(applies)


def measure(allocations: int, calls: int, rounds: int, events: int) -> dict[str, float]:
    open_body, allocate, predicates = bodies(allocations)
    with tempfile.TemporaryDirectory() as tmp:
        apps = {"indexed": make_app(Path(tmp), "indexed", RULE),
                "unindexed": make_app(Path(tmp), "unindexed", RULE, indexed=False),
                "counts-only": make_app(Path(tmp), "counts", COUNTS_RULE)}
        for app in apps.values():
            call(app, "/onSessionOpen", open_body)
            for body in allocate:
                call(app, "/allocateFunc", body)
            cpu_per_call(app, predicates, 50)  # warm-up: the catch-up over every event, decoders
        answers = {name: call(app, "/predicate", predicates[0]) for name, app in apps.items() if name != "counts-only"}
        assert answers["indexed"] == answers["unindexed"], answers
        samples: dict[str, list[float]] = {name: [] for name in apps}
        for _ in range(rounds):
            for name, app in apps.items():
                samples[name].append(cpu_per_call(app, predicates, calls))
        result = {name: statistics.median(values) for name, values in samples.items()}
        for name in ("indexed", "unindexed"):
            result[f"write {name}"], result[f"catch-up {name}"] = catch_up(apps[name], predicates, events, allocations)
        close(*apps.values())
    return result


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.cpu.allocations", description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=400, help="predicate calls per round (default 400)")
    parser.add_argument("--rounds", type=int, default=7, help="interleaved rounds, the median is reported")
    parser.add_argument("--events", type=int, default=40, help="allocateFunc events timed for the catch-up")
    parser.add_argument("--sizes", type=int, nargs="*", default=[40, 2000])
    args = parser.parse_args(argv)
    print(__doc__.split("\n\n")[1].replace("\n", " "))
    print(f"rule: {RULE.strip()}")
    print(f"{args.calls} calls x {args.rounds} rounds per app, CPU per call (median round), us:")
    for size in args.sizes:
        result = measure(size, args.calls, args.rounds, args.events)
        print(f"  {size:5d} allocations: predicate indexed {result['indexed'] * 1e6:7.1f}  unindexed "
              f"{result['unindexed'] * 1e6:7.1f}  counts-only {result['counts-only'] * 1e6:7.1f}  | "
              f"allocateFunc {result['write indexed'] * 1e6:6.1f}, its catch-up in the next call: "
              f"indexed app {result['catch-up indexed'] * 1e6:6.1f}, unindexed app "
              f"{result['catch-up unindexed'] * 1e6:6.1f}")


if __name__ == "__main__":
    main()
