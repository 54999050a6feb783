"""Where a worker's time goes: cProfile of the service's WSGI app answering predicate and
prioritize calls in-process (the same app object a gunicorn worker serves, minus the socket).

``python -m bench.cpu.profile [--calls N] [--verb predicate|prioritize] [--top K]``
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import tempfile

from bench.generate import Bodies, Cluster, ClusterSpec
from bench.scenarios import predicate_calls
from bench.server import POLICY_DIR


def environ(path: str, body: bytes) -> dict:
    return {"REQUEST_METHOD": "POST", "PATH_INFO": path, "CONTENT_TYPE": "application/json",
            "CONTENT_LENGTH": str(len(body)), "wsgi.input": io.BytesIO(body), "SERVER_NAME": "bench",
            "SERVER_PORT": "0", "wsgi.url_scheme": "http", "SERVER_PROTOCOL": "HTTP/1.1"}


def call(app, path: str, body: bytes) -> bytes:
    answer = {}
    chunks = app.wsgi_app(environ(path, body), lambda status, headers, exc_info=None: answer.setdefault("status", status))
    data = b"".join(chunks)
    assert answer["status"].startswith("200"), (answer, data[:300])
    return data


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.cpu.profile", description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--verb", choices=("predicate", "prioritize"), default="predicate")
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args(argv)
    from policy_extender.config import Config
    from policy_extender.web import create_app

    with tempfile.TemporaryDirectory() as tmp:
        app = create_app(Config(policy_dirs=(str(POLICY_DIR),), session_store=f"sqlite:{tmp}/sessions.sqlite3",
                                reload_interval=0.0, log_level="warning"))
        bodies = Bodies(Cluster(ClusterSpec(nodes=50, pods_per_node=20)))
        calls = predicate_calls(bodies) if args.verb == "predicate" else [("prioritize", "/prioritize", bodies.prioritize())]
        for _, path, body in calls[:50]:
            call(app, path, body)                                   # warm caches (decoders per read set)
        profiler = cProfile.Profile()
        profiler.enable()
        for k in range(args.calls):
            _, path, body = calls[k % len(calls)]
            call(app, path, body)
        profiler.disable()
    stats = pstats.Stats(profiler)
    print(f"{args.calls} {args.verb} calls, 50 nodes x 20 pods/node; top {args.top} by own time:")
    stats.sort_stats("tottime").print_stats(args.top)
    print(f"top {args.top} by cumulative time:")
    stats.sort_stats("cumulative").print_stats(args.top)


if __name__ == "__main__":
    main()
