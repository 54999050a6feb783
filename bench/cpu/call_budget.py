"""One evaluation budget per call, and the deadline from ``volcano_timeout`` (issue 44 item 4).

Method (printed): in-process, one prioritize call over N nodes through ``decide.handlers.respond``
on an in-process service (SQLite store) whose session holds those N nodes, wall time of one call
(each case runs once: they take seconds). Two score rules:

* ``linear``: ``count(m for m in cluster.nodes if m.ready)``, N elements per node, N x N a call;
* ``quadratic``: ``sum(count(m for m in cluster.nodes if m.name == n.name) for n in cluster.nodes
  if n.name != node.name)``, N + N x N per node, N^3 a call.

Columns: ``before``, a budget per evaluation as the code had it (each node's evaluation given its
own budget: ``PolicySet.prioritize`` of one node at a time, the times summed; only up to the sizes
where that ends in minutes); ``budget``, one budget per call and no deadline; ``deadline``, one
budget per call and a deadline 1 s (Volcano's default httpTimeout) after the call began.

``python -m bench.cpu.call_budget [--nodes 250,500,1000]``
"""

from __future__ import annotations

import argparse
import json
import logging
import time

from policy_extender.decide.handlers import respond
from policy_extender.errors import EvalError
from policy_extender.fixture_runner.exchange import Exchanger
from policy_extender.lang import budget
from policy_extender.policyset import compile_sources
from policy_extender.verb_names.volcano import ON_SESSION_OPEN
from policy_extender.wire import compact, decode

RULES = {
    "linear": "score linear: count(m for m in cluster.nodes if m.ready)\n",
    "quadratic": ("score quadratic: sum(count(m for m in cluster.nodes if m.name == n.name) "
                  "for n in cluster.nodes if n.name != node.name)\n"),
}
#: the largest N the per-evaluation column is measured at (beyond: minutes to hours)
BEFORE_UP_TO = {"linear": 1000, "quadratic": 100}


def opened(rule: str, count: int) -> tuple[Exchanger, bytes]:
    nodes = [{"name": f"n{i:04d}"} for i in range(count)]
    exchanger = Exchanger(compile_sources({"cost.policy": RULES[rule]}))
    body = compact.session_body([{"name": "j", "tasks": [{"name": "t"}]}], [{"name": "q"}], nodes)
    exchanger.call(ON_SESSION_OPEN, json.dumps(body).encode())
    return exchanger, json.dumps(compact.prioritize_body({"name": "t", "job": "j"}, nodes)).encode()


def before(exchanger: Exchanger, body: bytes) -> tuple[float, str]:
    """Seconds with a budget per evaluation: each node decided alone under its own budget."""
    ps, env = exchanger.policy_set, exchanger.service.session_cache.env()
    request = decode.decode_prioritize(body, ps.reads, env)
    started = time.perf_counter()
    for node in request.nodes:
        previous = budget.begin()
        try:
            ps.prioritize(request.task, [node], env)
        except EvalError as err:
            return time.perf_counter() - started, err.code
        finally:
            budget.end(previous)
    return time.perf_counter() - started, "200"


def served(exchanger: Exchanger, body: bytes, deadline_seconds: float | None) -> tuple[float, str]:
    started = time.perf_counter()
    deadline = time.monotonic() + deadline_seconds if deadline_seconds else None
    reply = respond(exchanger.service, "prioritize", body, deadline)
    seconds = time.perf_counter() - started
    outcome = str(reply.status)
    if reply.status != 200:
        error = json.loads(reply.body)["error"]
        outcome = next((code for code in ("E512", "E513") if code in error), outcome)
    return seconds, outcome


def cell(result: tuple[float, str] | None) -> str:
    return "-" if result is None else f"{result[0]:8.2f} s {result[1]:>4}"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.cpu.call_budget", description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", default="100,250,500,1000")
    args = parser.parse_args(argv)
    logging.disable(logging.ERROR)  # each 500 is logged with its traceback by decide.handlers.failed
    print(__doc__.split("\n\n", 1)[1].rsplit("\n\n", 1)[0])
    print(f"\n{'rule':<10} {'nodes':>6}  {'before':>15}  {'budget':>15}  {'deadline 1 s':>15}")
    for rule in RULES:
        for count in (int(n) for n in args.nodes.split(",")):
            exchanger, body = opened(rule, count)
            old = before(exchanger, body) if count <= BEFORE_UP_TO[rule] else None
            print(f"{rule:<10} {count:>6}  {cell(old):>15}  {cell(served(exchanger, body, None)):>15}  "
                  f"{cell(served(exchanger, body, 1.0)):>15}", flush=True)


if __name__ == "__main__":
    main()
