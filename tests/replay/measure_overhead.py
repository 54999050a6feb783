"""Recording overhead: median predicate latency with and without ``--record``, same run.

Two real gunicorn services (1 worker each, same policies, same session store kind) are started
side by side; the client sends the sample predicate body in alternating batches to each over a
keep-alive connection inside an open session, and prints the median and p90 per service.

    python -m tests.replay.measure_overhead [--calls 3000] [--sample 1.0]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from tests.support.bodies import sample
from tests.support.policies import write_policies
from tests.support.recorded import RECORDED
from tests.replay.server import RecordingServer
from tests.support.volcano import VolcanoClient

BATCH = 100


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=3000, help="predicate calls per service")
    parser.add_argument("--sample", default="1.0", help="--record-sample of the recording service")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as state:
        state_dir = Path(state)
        policies = write_policies(state_dir / "policies", RECORDED)
        servers = {"off": RecordingServer(state_dir, policies, workers=1),
                   "record": RecordingServer(state_dir, policies, "--record", str(state_dir / "rec"),
                                             "--record-sample", args.sample, workers=1)}
        try:
            timings = measure(servers, args.calls)
        finally:
            for server in servers.values():
                server.stop()
        size = sum(f.stat().st_size for f in (state_dir / "rec").rglob("*.rec"))
    report(timings, size)


def measure(servers: dict, calls: int) -> dict[str, list[float]]:
    clients = {}
    for name, server in servers.items():
        server.wait_ready()
        clients[name] = VolcanoClient(server.port)
        clients[name].call("onSessionOpen", sample("onSessionOpen"))
    body = sample("predicate")
    timings: dict[str, list[float]] = {name: [] for name in servers}
    for _ in range(calls // BATCH):
        for name, client in clients.items():
            timings[name] += [timed(client, body) for _ in range(BATCH)]
    for client in clients.values():
        client.call("onSessionClose", b"{}")
        client.close()
    return timings


def timed(client: VolcanoClient, body: bytes) -> float:
    started = time.perf_counter()
    status, _ = client.raw("predicate", body)
    assert status == 200
    return (time.perf_counter() - started) * 1e6


def report(timings: dict[str, list[float]], recorded_bytes: int) -> None:
    medians = {name: statistics.median(values) for name, values in timings.items()}
    for name, values in timings.items():
        p90 = statistics.quantiles(values, n=10)[-1]
        print(f"{name:>7}: median {medians[name]:7.1f} us  p90 {p90:7.1f} us  ({len(values)} calls)")
    extra = medians["record"] - medians["off"]
    print(f"recording overhead: {extra:+.1f} us per predicate ({extra / medians['off']:+.1%}); "
          f"{recorded_bytes / 1e6:.1f} MB written")


if __name__ == "__main__":
    main()
