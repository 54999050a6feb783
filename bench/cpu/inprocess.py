"""CPU per call of each app in one process, side by side: the service's WSGI app, the hand-written
WSGI baseline and the bare floor answering the same bodies (no sockets, no gunicorn).

Rounds are interleaved (service, handwritten, bare, service, ...) and timed with the process's
CPU clock, so background load on a shared machine moves every app alike; the median round is
reported, with the ratios, and the median of the per-round ratios of the service to the
hand-written app (whose rounds run back to back), with its middle half (pin the process to one
core, ``taskset -c 1``, and use ``--rounds 21`` for a steady figure). This isolates what the app itself costs per call; ``python -m bench``
measures the same apps under a real gunicorn.

``--session`` opens a session first (the same cluster's onSessionOpen), so the calls take the
normal path; without it every call is one that arrives with no session open.

The service runs twice per round: as configured (``service``: a predicate node sent again byte for
byte is not decoded again, ``wire/node_reuse.py``; the calls cycle through 4 tasks x 50 nodes, so
after the first task every node is one seen before, as in a Volcano cycle) and with that off
(``service-reuse-off``: every body decoded whole, the code before node reuse); the hand-written
baseline decodes with the service's decoders, so it runs both ways too.

``python -m bench.cpu.inprocess [--verb predicate|prioritize] [--calls N] [--rounds R] [--session]``
"""

from __future__ import annotations

import argparse
import io
import statistics
import tempfile
import time

from bench import bare_wsgi, handwritten
from bench.generate import Bodies, Cluster, ClusterSpec
from bench.scenarios import predicate_calls
from bench.server import POLICY_DIR
from policy_extender.wire import node_reuse


def environ(path: str, body: bytes) -> dict:
    return {"REQUEST_METHOD": "POST", "PATH_INFO": path, "CONTENT_TYPE": "application/json",
            "CONTENT_LENGTH": str(len(body)), "wsgi.input": io.BytesIO(body), "SERVER_NAME": "bench",
            "SERVER_PORT": "0", "wsgi.url_scheme": "http", "SERVER_PROTOCOL": "HTTP/1.1"}


def _start_response(status, headers, exc_info=None):
    if not status.startswith("200"):
        raise RuntimeError(f"answered {status}")


def call(app, path: str, body: bytes) -> bytes:
    return b"".join(app(environ(path, body), _start_response))


def cpu_per_call(app, calls, count: int) -> float:
    """CPU seconds per call over ``count`` calls cycling through ``calls``."""
    t0 = time.process_time()
    for k in range(count):
        _, path, body = calls[k % len(calls)]
        call(app, path, body)
    return (time.process_time() - t0) / count


def service_app(tmp: str):
    from policy_extender.config import Config
    from policy_extender.web import create_app
    return create_app(Config(policy_dirs=(str(POLICY_DIR),), session_store=f"sqlite:{tmp}/sessions.sqlite3",
                             reload_interval=0.0, log_level="warning")).wsgi_app


def close(*apps) -> None:
    """Flush and stop in-process services (``service_app``, or any ``VerbDispatch``) while their
    store's directory still exists: the tally's exit flush would otherwise write to a store
    whose temporary directory is gone, and warn that the session and the tally were lost."""
    for app in apps:
        service = getattr(app, "service", None)
        if service is not None:
            service.tally.flush()
            service.stop()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.cpu.inprocess", description=__doc__.splitlines()[0])
    parser.add_argument("--verb", choices=("predicate", "prioritize"), default="predicate")
    parser.add_argument("--calls", type=int, default=0, help="calls per round (default 1000 predicate, 20 prioritize)")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--session", action="store_true", help="open a session first (the normal path)")
    args = parser.parse_args(argv)
    bodies = Bodies(Cluster(ClusterSpec(nodes=50, pods_per_node=20)))
    calls = predicate_calls(bodies) if args.verb == "predicate" else [("prioritize", "/prioritize", bodies.prioritize())]
    count = args.calls or (1000 if args.verb == "predicate" else 20)
    with tempfile.TemporaryDirectory() as tmp:
        service = service_app(tmp)
        apps = {"service": service, "service-reuse-off": service, "handwritten-wsgi": handwritten.wsgi_app,
                "handwritten-reuse-off": handwritten.wsgi_app, "bare": bare_wsgi.app}
        if args.session:
            call(apps["service"], "/onSessionOpen", bodies.snapshot())
        for app in apps.values():
            cpu_per_call(app, calls, min(count, 50))               # warm-up: decoders, policy, caches
        rounds: dict[str, list[float]] = {name: [] for name in apps}
        for _ in range(args.rounds):
            for name, app in apps.items():
                node_reuse.configure(0 if name.endswith("-reuse-off") else node_reuse.DEFAULT_MAX_BYTES)
                rounds[name].append(cpu_per_call(app, calls, count))
        close(service)
    medians = {name: statistics.median(values) for name, values in rounds.items()}
    print(f"{args.verb}, 50 nodes x 20 pods/node, {count} calls x {args.rounds} rounds, "
          f"{'session open' if args.session else 'no session open'}, CPU per call (median round):")
    for name, value in medians.items():
        print(f"  {name:18s} {value * 1e6:9.1f} us")
    service, hand, bare = medians["service"], medians["handwritten-wsgi"], medians["bare"]
    off, hand_off = medians["service-reuse-off"], medians["handwritten-reuse-off"]
    print(f"  service / handwritten-wsgi = {service / hand:.3f} (engine extra {(service - hand) * 1e6:.1f} us); "
          f"reuse off: {off / hand_off:.3f} ({(off - hand_off) * 1e6:.1f} us); "
          f"service / service-reuse-off = {service / off:.3f}; service / bare = {service / bare:.2f}")
    # each round's service and hand-written rounds ran back to back: their ratio, round by round,
    # cancels what the host did over longer spans (the steadiest figure of this script)
    ratios = sorted(s / h for s, h in zip(rounds["service"], rounds["handwritten-wsgi"]))
    extras = sorted((s - h) * 1e6 for s, h in zip(rounds["service"], rounds["handwritten-wsgi"]))
    quarter = len(ratios) // 4
    print(f"  per round, service / handwritten-wsgi: median {statistics.median(ratios):.3f} "
          f"(middle half {ratios[quarter]:.3f}-{ratios[-1 - quarter]:.3f}), engine extra median "
          f"{statistics.median(extras):.1f} us, over {len(ratios)} rounds")


if __name__ == "__main__":
    main()
