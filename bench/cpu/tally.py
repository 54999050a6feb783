"""CPU per predicate call with the decision tally on and off, side by side (issue 13's bound:
the tally adds at most 10 %).

Method: two instances of the service's WSGI app in this one process, the same bundled bench
policies (``bench/policies``), each on its own SQLite session store with a session open (the same
cluster's onSessionOpen): ``tally: true`` (the default) and ``tally: false``. The same predicate
bodies (50 nodes x 20 pods/node, 4 pending tasks against every node) go through each; rounds are
paired and interleaved (on then off, then off then on, ...: drift on a shared machine hits both
alike) and timed with the process CPU clock, which counts every thread, the tally's flusher
included. Each round of the tally-on app ends with a synchronous
flush of what the round recorded, inside the timed region, so the store write is counted once per
round of ``--calls`` calls (the service flushes once per ``tally_flush_seconds``, i.e. after at
least as many calls under load): a pessimistic figure. Reported: each app's median round, and
the median over the pairs of (on / off - 1), the headline figure.

``python -m bench.cpu.tally [--calls N] [--rounds R] [--reject]``; ``--reject`` adds three filter rules
that reject most nodes (the tally then also records a rejection count and an example reason
per call).
"""

from __future__ import annotations

import argparse
import io
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from bench.generate import Bodies, Cluster, ClusterSpec
from bench.scenarios import predicate_calls
from bench.server import POLICY_DIR

REJECTING = """\
filter zone-ok: node.name != "node-0001"
    reason "node {node.name} is drained"
filter gpu-ok: node.idle.gpu >= 0
filter most-nodes: node.name in ["node-0000", "node-0002", "node-0003"]
    reason "{node.name} is not one of the three"
"""


def call(wsgi, path: str, body: bytes) -> bytes:
    """One POST through the WSGI app, as gunicorn would make it (no socket)."""
    environ = {"REQUEST_METHOD": "POST", "PATH_INFO": path, "CONTENT_TYPE": "application/json",
               "CONTENT_LENGTH": str(len(body)), "wsgi.input": io.BytesIO(body), "SERVER_NAME": "bench",
               "SERVER_PORT": "0", "wsgi.url_scheme": "http", "SERVER_PROTOCOL": "HTTP/1.1"}

    def start_response(status, headers, exc_info=None):
        if not status.startswith("200"):
            raise RuntimeError(f"{path} answered {status}")

    return b"".join(wsgi(environ, start_response))


def app(tmp: str, policy_dir: str, tally: bool):
    from policy_extender.config import Config
    from policy_extender.web import create_app
    return create_app(Config(policy_dirs=(policy_dir,), session_store=f"sqlite:{tmp}/sessions.sqlite3",
                             reload_interval=0.0, log_level="warning", tally=tally))


def round_cpu(wsgi, calls, count: int, service=None) -> float:
    t0 = time.process_time()
    for k in range(count):
        _, path, body = calls[k % len(calls)]
        call(wsgi, path, body)
    if service is not None:
        service.tally.flush()
    return (time.process_time() - t0) / count


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.cpu.tally", description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=500, help="predicate calls per round (default 500)")
    parser.add_argument("--rounds", type=int, default=21, help="rounds per app (default 21)")
    parser.add_argument("--reject", action="store_true", help="add three filter rules that reject most nodes")
    args = parser.parse_args(argv)
    bodies = Bodies(Cluster(ClusterSpec(nodes=50, pods_per_node=20)))
    calls = predicate_calls(bodies)
    with tempfile.TemporaryDirectory() as on_dir, tempfile.TemporaryDirectory() as off_dir, \
            tempfile.TemporaryDirectory() as policies:
        for file in Path(POLICY_DIR).glob("*.policy"):
            shutil.copy(file, policies)
        if args.reject:
            Path(policies, "reject.policy").write_text(REJECTING)
        apps = {"tally on": app(on_dir, policies, True), "tally off": app(off_dir, policies, False)}
        services = {name: a.extensions["policy_extender"] for name, a in apps.items()}
        for a in apps.values():
            call(a.wsgi_app, "/onSessionOpen", bodies.snapshot())
            round_cpu(a.wsgi_app, calls, min(args.calls, 100))  # warm-up: decoders, policy, caches
        rounds: dict[str, list[float]] = {name: [] for name in apps}
        for i in range(args.rounds):
            for name in (("tally on", "tally off") if i % 2 == 0 else ("tally off", "tally on")):
                rounds[name].append(round_cpu(apps[name].wsgi_app, calls, args.calls,
                                              services[name] if name == "tally on" else None))
        fits = sum(1 for _, path, body in calls[:200] if call(apps["tally off"].wsgi_app, path, body) == b'{"status":"","code":0}')
        for s in services.values():
            s.stop()
    medians = {name: statistics.median(values) for name, values in rounds.items()}
    print(f"predicate, 50 nodes x 20 pods/node, {len(calls)} bodies ({fits} of the first 200 fit), "
          f"{'bench policies + 3 rejecting rules' if args.reject else 'bench policies'}, session open, "
          f"{args.calls} calls x {args.rounds} paired rounds, process CPU per call (median round), "
          f"tally flushed to SQLite at the end of every tally-on round:")
    for name, value in medians.items():
        spread = f"rounds {min(rounds[name]) * 1e6:.1f}..{max(rounds[name]) * 1e6:.1f} us"
        print(f"  {name:10s} {value * 1e6:8.1f} us   ({spread})")
    on, off = medians["tally on"], medians["tally off"]
    paired = statistics.median(a / b - 1 for a, b in zip(rounds["tally on"], rounds["tally off"]))
    print(f"  tally adds {(on - off) * 1e6:.1f} us per call (medians); median of the {args.rounds} paired rounds: "
          f"{100 * paired:+.1f} % (bound: +10 %)")


if __name__ == "__main__":
    main()
