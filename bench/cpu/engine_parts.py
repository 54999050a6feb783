"""Where the engine's extra CPU per predicate goes: each part of the service's predicate path
timed alone, hot, next to what the hand-written baseline does for the same call.

``python -m bench.cpu.inprocess --session`` measures whole calls (service against the hand-written
WSGI app, 1,000 calls cycling 200 bodies of 138 KB). This script opens the same session in one
process, then times each part of a predicate call on its own with ``timeit`` (the same few
requests again and again, so everything is in cache): the decode both apps share, the policy
evaluation against the hand-written rules, and the parts only the service has (the session
head, the decision tally, the metrics, the request id, the request-finished callbacks). A whole
call costs more than the sum of its hot parts (the 138 KB body pushes the rest out of the CPU
caches); the ratio between the parts is what this shows.

``python -m bench.cpu.engine_parts [--number N] [--repeat R]``
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import timeit

from bench import handwritten
from bench.generate import Bodies, Cluster, ClusterSpec
from bench.cpu.inprocess import call, close, service_app
from bench.scenarios import predicate_calls


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.cpu.engine_parts", description=__doc__.splitlines()[0])
    parser.add_argument("--number", type=int, default=20000, help="calls per timing")
    parser.add_argument("--repeat", type=int, default=5, help="timings per part (the median is printed)")
    args = parser.parse_args(argv)
    from policy_extender import logs, metrics
    from policy_extender.decide import handlers
    from policy_extender.decide.table import VERBS

    bodies = Bodies(Cluster(ClusterSpec(nodes=50, pods_per_node=20)))
    calls = predicate_calls(bodies)
    body = calls[1][2]
    with tempfile.TemporaryDirectory() as tmp:
        app = service_app(tmp)
        call(app, "/onSessionOpen", bodies.snapshot())
        for _, path, each in calls[:50]:
            call(app, path, each)                                    # warm: decoders, kept nodes
        service = app.service                                         # VerbDispatch
        verb = VERBS["predicate"]
        policy_set, env = handlers.policy_and_env(service, "predicate")
        request = verb.decode(body, policy_set.reads, env)
        decision = policy_set.predicate(request.task, request.node, env)
        hand = handwritten.READS
        parts = {
            "whole call: service": lambda: call(app, "/predicate", body),
            "whole call: hand-written": lambda: call(handwritten.wsgi_app, "/predicate", body),
            "decode (both; node kept)": lambda: verb.decode(body, hand, env),
            "rules: hand-written": lambda: handwritten.filter_node(request.task, request.node),
            "rules: policy evaluation": lambda: policy_set.predicate(request.task, request.node, env),
            "session head + pinned set": lambda: handlers.policy_and_env(service, "predicate"),
            "job-in-snapshot check": lambda: env.job(request.task.job_id),
            "decision tally": lambda: service.tally.record_predicate(env.head, request.task, decision, (), "-"),
            "metrics": lambda: metrics.note_request("predicate", 200, 0.0001, len(body), "", ""),  # a fit
            "request id": logs.new_request_id,
            "handler (all of the above but the HTTP layer)": lambda: handlers.HANDLERS["predicate"](service, body),
        }
        print(f"predicate, 50 nodes x 20 pods/node ({len(body) / 1e3:.0f} KB body), session open, "
              f"hot: median of {args.repeat} x {args.number} calls per part")
        for name, fn in parts.items():
            seconds = statistics.median(timeit.repeat(fn, number=args.number, repeat=args.repeat)) / args.number
            print(f"  {name:48s} {seconds * 1e6:7.2f} us")
        close(app)


if __name__ == "__main__":
    main()
