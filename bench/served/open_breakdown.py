"""onSessionOpen of a large cluster against the fastest body-reading floor, and where the time goes.

Servers, all under the service's shipped gunicorn settings (2 workers x 4 threads), started once
and measured in interleaved rounds (floor, service, service-whole, floor, ...) so that load from
other processes on the host hits each alike:

* ``floor``: ``bench.bare_wsgi:socket_app``: reads the body straight from gunicorn's socket with
  ``recv_into`` into one buffer allocated at the body's length (``web.socket_body``: an
  anonymous map from 32 MiB, its pages faulted in as the bytes arrive) and answers ``{}``: no decoding, no store;
* ``service``: ``policy-extender serve`` on ``bench/policies`` with its own SQLite session store,
  as shipped: the body is decoded while it arrives (``wire.open_stream``);
* ``service-whole``: the same service with the streamed decode switched off
  (``OpenStream`` threshold raised past the body, ``bench.served.open_breakdown whole-serve``): the
  body is received, then decoded whole, as before the streamed decode existed;
* ``service-gthread`` (only when named in ``--servers``): the service on gunicorn's own gthread
  worker (``bench.served.open_breakdown gthread-serve``), where a thread takes each connection at once
  and reads the request, against ``service``, whose worker (``web/worker.py``) receives the
  request's first 64 KiB on its event loop before a thread takes it;
* ``service-reuse-off`` (only when named in ``--servers``): the service with ``--node-reuse-bytes
  0``: streamed, but no node taken from the ones its predicates kept (the open before it did);
* ``service-small-pages`` (only when named): the service with ``--huge-pages false``: the body's
  map in 4 KiB pages (the floor and ``service`` advise it for huge pages, ``web.socket_body``);
* ``floor-kept`` (only when named): the floor with its buffer preallocated once
  (``bench.bare_wsgi:kept_socket_app``: each body's map kept for the next, as the service keeps
  it, ``keep_body_maps``); ``service-unkept``: the service with ``--keep-body-maps false``
  (a new map for each body, as before it kept them). Each floor that runs gets its own table.
* ``service-cluster`` (only when named): the service with ``bench/policies`` and the research
  queue policy (``policies/research-queue.policy``: ``cluster.idle``, an aggregate over
  ``cluster.nodes`` by label) and a rule on ``cluster.jobs`` (``CLUSTER_RULES``): the snapshot
  then keeps every node (its idle, allocatable and labels) and counts the jobs by queue and
  phase, where ``service``'s keeps none (issue 40: "a set that reads none pays nothing").

Each open is a new connection from this process (a body file sent with ``sendfile``), timed from
before the connect to the last byte of the answer (client-measured, upload included); then an
onSessionClose (not timed). One warm-up open per server first. The services run with
``POLICY_EXTENDER_TRACE`` (``policy_extender/trace.py``): each worker records, per call, when the dispatch
got the request and when the body was all received, decoded, encoded to the snapshot and stored,
on the host's monotonic clock, which this client reads too. The breakdown of one open:

* ``before``: connect, request headers, gunicorn accepting and parsing (client send to dispatch);
* ``receive``: the body read (with ``service``, the pieces decoded meanwhile; their decode time
  is ``overlapped``);
* ``decode``: the decode left after the last byte (``service``: the last pieces and the rest of
  the document; ``service-whole``: the whole pruned decode);
* ``encode``: the pruned snapshot to msgpack; ``store``: the store's open transaction;
* ``answer``: counters, metrics, the answer written and read by the client.

``worker CPU``: CPU seconds the answering worker used for the open. ``load``: the 1-minute load
average before the open. Ratios are service / floor of the same round.

``--after-predicates K``: before each open (the warm-up's too), every server is sent the
predicates of K pending tasks on every node over 16 keep-alive connections (not timed), as a
cycle's predicates come before the next cycle's open; each service worker then keeps the nodes it
was sent (``wire.node_reuse``), and the open takes those (``nodes reused`` in the breakdown);
with or without it, a worker takes the jobs its last open decoded (``jobs reused``).
The snapshot's nodes are those of the predicates byte for byte (in a cluster, the nodes that
changed since are checked again).

Which worker answers an open is the kernel's choice. A round answered by a worker that had not
answered an open before (nothing of an earlier open kept: ``jobs reused`` 0) says so, and the
report gives the medians without such rounds too. ``--warm-every-worker`` sends each worker of
each server one warm-up open, as in a cluster, where a worker's first open comes once in its life:
the kernel favours the worker that answered last (8 opens in a row went to one worker in 4 of 10
runs on a loaded host), so each warm-up open is pinned to its worker by stopping the server's
other workers (``SIGSTOP``) from after its predicates until it is answered (``SIGCONT``).

``python -m bench.served.open_breakdown [--nodes 500 --pods 30] [--runs 5] [--snapshot FILE] [--after-predicates K] [--warm-every-worker]``
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.generate import Bodies, Cluster, ClusterSpec, write_snapshot
from bench.load import Connection, Pool
from bench.server import ROOT, Server, _RUNNING, command, process_cpu

#: services started through a launcher of this module instead of ``policy_extender``
LAUNCHERS = {"service-whole": ("bench.served.open_breakdown", "whole-serve"),
             "service-gthread": ("bench.served.open_breakdown", "gthread-serve")}
#: what ``service-cluster`` serves besides bench/policies and policies/research-queue.policy
CLUSTER_RULES = 'ready research-backlog: (cluster.jobs["research"].pending ?? 0) < 1000\n'
#: the servers others are measured against (each that runs gets its own table)
FLOORS = ("floor", "floor-kept")
PHASES = ("before", "receive", "decode", "encode", "store", "answer")
#: waits of 0.3 s at most for an open's trace line (a loaded machine flushes late)
TRACE_WAITS = 20


class TracedServer(Server):
    """A ``Server`` whose workers write ``POLICY_EXTENDER_TRACE`` lines (services only); with
    ``launcher`` (module and arguments) the service is started through ``python -m`` that module
    instead of ``policy_extender`` (the serve arguments follow)."""

    def __init__(self, kind: str, trace_path: str | None, launcher: tuple[str, ...] = (), **kw):
        super().__init__(kind, **kw)
        self.trace_path, self.launcher, self.seen = trace_path, launcher, 0
        self.opened_by: set[int] = set()  # workers that answered an open (warm-up included)

    def start(self) -> "TracedServer":
        env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
        env.pop("POLICY_EXTENDER_TRACE", None)
        if self.trace_path:
            env["POLICY_EXTENDER_TRACE"] = self.trace_path
        argv = command(self.kind, self.port, self.workers, self.threads, self.extra)
        if self.launcher:
            argv = [sys.executable, "-m", *self.launcher, *argv[3:]]
        self.log = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=self.log,
                                     start_new_session=True)
        _RUNNING.add(self)
        self._wait_ready()
        return self

    def new_trace(self) -> list[dict]:
        """Trace lines written since the last call (the workers flush every 0.25 s)."""
        if not self.trace_path or not os.path.exists(self.trace_path):
            return []
        with open(self.trace_path, "rb") as f:
            f.seek(self.seen)
            data = f.read()
        complete = data[:data.rfind(b"\n") + 1]
        self.seen += len(complete)
        return [json.loads(line) for line in complete.splitlines() if line]


def cluster_policies(tmp: str) -> str:
    """A directory of bench/policies, the research queue policy and ``CLUSTER_RULES``."""
    directory = Path(tmp) / "cluster-policies"
    directory.mkdir(exist_ok=True)
    for source in (*sorted((ROOT / "bench" / "policies").glob("*.policy")), ROOT / "policies" / "research-queue.policy"):
        (directory / source.name).write_text(source.read_text(encoding="utf-8"), encoding="utf-8")
    (directory / "cluster-jobs.policy").write_text(CLUSTER_RULES, encoding="utf-8")
    return str(directory)


def load_average() -> float:
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])


def open_once(server: TracedServer, path: str, pinned_to: int | None = None) -> dict:
    """One open and its close; ``pinned_to``: the only worker running (``only_worker``)."""
    workers = server.worker_pids()
    cpu0 = {pid: process_cpu(pid) for pid in workers}
    load = load_average()
    conn = Connection(server.host, server.port, timeout=120)
    sent = time.perf_counter()
    status, _ = conn.request("/onSessionOpen", path)
    done = time.perf_counter()
    conn.close()
    spent = {pid: process_cpu(pid) - cpu0[pid] for pid in workers}
    answering = pinned_to or max(spent, key=spent.get)  # the worker that answered used the CPU
    cpu = spent[answering]
    close = Connection(server.host, server.port, timeout=30)
    close.request("/onSessionClose", b"{}")
    close.close()
    row = {"seconds": done - sent, "status": status, "cpu": cpu, "load": load}
    if server.trace_path:
        opens: list[dict] = []
        for _ in range(TRACE_WAITS):  # the workers flush their trace lines every 0.25 s
            time.sleep(0.3)
            opens += [r for r in server.new_trace() if r.get("kind") == "request" and r["verb"] == "onSessionOpen"
                      and sent <= r["start"] <= done]
            if opens:
                break
        if opens:
            row.update(breakdown(opens[0], sent, done), traced=opens[0]["pid"])
            answering = pinned_to or opens[0]["pid"]  # the trace names it (the CPU alone can tie on a small body)
    row.update(pid=answering, first=answering not in server.opened_by)
    server.opened_by.add(answering)
    return row


@contextlib.contextmanager
def only_worker(server: TracedServer, pid: int):
    """The server's other workers stopped (``SIGSTOP``) meanwhile: only ``pid`` accepts a
    connection. Gunicorn's arbiter replaces a worker silent for its ``timeout`` (far longer)."""
    others = [other for other in server.worker_pids() if other != pid]
    try:
        for other in others:
            os.kill(other, signal.SIGSTOP)
        yield
    finally:
        for other in others:
            os.kill(other, signal.SIGCONT)


def breakdown(record: dict, sent: float, done: float) -> dict:
    at = dict(record["phases"])
    values = record.get("values", {})
    return {"before": record["start"] - sent, "receive": at["received"] - record["start"],
            "decode": at["decoded"] - at["received"], "encode": at["encoded"] - at["decoded"],
            "store": at["stored"] - at["encoded"], "answer": done - at["stored"],
            "overlapped": values.get("decode_while_receiving", 0.0), "pieces": values.get("pieces", 0),
            "reused": values.get("nodes_reused", 0), "jobs": values.get("jobs_reused", 0),
            "map_kept": values.get("body_map_kept")}  # None: a body under 32 MiB (not mapped)


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.0f}"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["whole-serve"]:
        return whole_serve(argv[1:])
    if argv[:1] == ["gthread-serve"]:
        return gthread_serve(argv[1:])
    parser = argparse.ArgumentParser(prog="python -m bench.served.open_breakdown", description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=500)
    parser.add_argument("--pods", type=int, default=30)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--snapshot", help="an onSessionOpen body file to reuse (default: generate one in a temp dir)")
    parser.add_argument("--servers", default="floor,service,service-whole")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--warm-every-worker", action="store_true",
                        help="warm up every worker of each server with one open (the other workers stopped meanwhile)")
    parser.add_argument("--after-predicates", type=int, default=0, metavar="K",
                        help="send K tasks' predicates on every node before each open (not timed)")
    args = parser.parse_args(argv)
    if args.after_predicates and args.snapshot:
        parser.error("--after-predicates generates its cluster: leave out --snapshot")
    with tempfile.TemporaryDirectory(prefix="bench-open-breakdown-") as tmp:
        path, predicates = args.snapshot, []
        if path is None:
            path = os.path.join(tmp, "snapshot.json")
            cluster = Cluster(ClusterSpec(nodes=args.nodes, pods_per_node=args.pods,
                                          pending_jobs=max(args.after_predicates, 4)))
            with open(path, "wb") as f:
                write_snapshot(cluster, f)
            bodies = Bodies(cluster)
            predicates = [("predicate", "/predicate", body) for p in range(args.after_predicates)
                          for body in bodies.predicates(p=p)]
        size = os.path.getsize(path)
        warm = "one warm-up open per worker of each server, pinned to it" if args.warm_every_worker \
            else "one warm-up per server"
        print(f"method: {Path(__file__).name}: onSessionOpen of {size / 1e6:.1f} MB ({path}), {args.runs} interleaved "
              f"rounds after {warm}; each open a new connection, client-measured from before connect "
              f"to the answer's last byte; gunicorn {args.workers} workers x {args.threads} threads; nproc {os.cpu_count()}; "
              f"uptime load at start: {open('/proc/loadavg').read().split()[:3]}"
              + (f"; before each open, {len(predicates)} predicates ({args.after_predicates} tasks x {args.nodes} nodes)"
                 if predicates else ""), flush=True)
        kinds = args.servers.split(",")
        servers: dict[str, TracedServer] = {}
        try:
            for kind in kinds:
                store = ("--session-store", f"sqlite:{tmp}/{kind}.sqlite3")
                if kind in FLOORS:
                    servers[kind] = TracedServer("bare-socket" if kind == "floor" else "bare-socket-kept", None,
                                                 workers=args.workers, threads=args.threads)
                else:
                    extra = store + (("--node-reuse-bytes", "0") if kind == "service-reuse-off" else ()) \
                        + (("--huge-pages", "false") if kind == "service-small-pages" else ()) \
                        + (("--keep-body-maps", "false") if kind == "service-unkept" else ()) \
                        + (("--policy-dirs", cluster_policies(tmp)) if kind == "service-cluster" else ())
                    servers[kind] = TracedServer("service", f"{tmp}/{kind}.trace", launcher=LAUNCHERS.get(kind, ()),
                                                 workers=args.workers, threads=args.threads, extra=extra)
                servers[kind].start()
            pools = {kind: Pool(server.host, server.port, 16) for kind, server in servers.items()} if predicates else {}

            def opened(kind: str, pinned_to: int | None = None) -> dict:
                if predicates:
                    pools[kind].map(predicates)
                if pinned_to is None:
                    return open_once(servers[kind], path)
                with only_worker(servers[kind], pinned_to):
                    row = open_once(servers[kind], path, pinned_to)
                if row.get("traced", pinned_to) != pinned_to:
                    raise SystemExit(f"{kind}: an open pinned to worker {pinned_to} was answered by {row['traced']}")
                return row

            for kind, server in servers.items():
                targets = sorted(server.worker_pids()) if args.warm_every_worker else [None]
                answered = [opened(kind, pid)["pid"] for pid in targets]
                print(f"warm-up {kind}: answered by worker {', '.join(map(str, answered))}", flush=True)
                server.new_trace()
            rounds: list[dict[str, dict]] = []
            for n in range(args.runs):
                rounds.append({kind: opened(kind) for kind in servers})
                line = [f"round {n + 1}:"]
                for kind, row in rounds[-1].items():
                    line.append(f"{kind} {ms(row['seconds'])} ms (cpu {ms(row['cpu'])}, load {row['load']:.2f}"
                                + f", worker {row['pid']}" + (", its first open" if row["first"] else "")
                                + (f", nodes reused {row['reused']}, jobs reused {row['jobs']}" if "reused" in row else "")
                                + (f", {'kept' if row['map_kept'] else 'new'} map" if row.get("map_kept") is not None else "")
                                + (f", status {row['status']}" if row["status"] != 200 else "") + ")")
                print("  ".join(line), flush=True)
        finally:
            for pool in pools.values() if predicates else ():
                pool.close()
            for server in servers.values():
                server.stop()
    report(rounds, kinds)
    return 0


def report(rounds: list[dict[str, dict]], kinds: list[str]) -> None:
    for base in [k for k in FLOORS if k in kinds] or [None]:
        against(rounds, kinds, base)
    med = lambda k, f: statistics.median(r[k][f] for r in rounds if f in r[k])  # noqa: E731
    print("\nwhere the time goes (medians over the rounds, ms):\n")
    print("| server | total | " + " | ".join(PHASES) + " | decode overlapped with receive | worker CPU |")
    print("|---|---|" + "---|" * len(PHASES) + "---|---|")
    for k in kinds:
        if all(p in rounds[0][k] for p in PHASES):
            print(f"| {k} | {ms(med(k, 'seconds'))} | " + " | ".join(ms(med(k, p)) for p in PHASES)
                  + f" | {ms(med(k, 'overlapped'))} ({statistics.median(r[k]['pieces'] for r in rounds):.0f} pieces) | {ms(med(k, 'cpu'))} |")
        else:
            print(f"| {k} | {ms(med(k, 'seconds'))} | " + " | ".join("" for _ in PHASES) + f" | | {ms(med(k, 'cpu'))} |")


def against(rounds: list[dict[str, dict]], kinds: list[str], base: str | None) -> None:
    """The per-round table and medians with ratios to the floor ``base`` (None: no floor ran)."""
    services = [k for k in kinds if k != base]
    print(f"\nper round (ms; ratio = server / {base} of the same round):\n")
    print(f"| round | load | {base} | " + " | ".join(f"{k} | ratio" for k in services) + " |")
    print("|---|---|---|" + "---|---|" * len(services))
    for n, r in enumerate(rounds, 1):
        floor = r.get(base, {}).get("seconds")
        cells = []
        for k in services:
            s = r[k]["seconds"]
            cells += [ms(s), f"{s / floor:.2f}" if floor else "-"]
        print(f"| {n} | {r[kinds[0]]['load']:.2f} | {ms(floor) if floor else '-'} | " + " | ".join(cells) + " |")
    med = lambda k, f: statistics.median(r[k][f] for r in rounds if f in r[k])  # noqa: E731
    if base is not None:
        cells = []
        for k in services:
            ratios = [r[k]["seconds"] / r[base]["seconds"] for r in rounds]
            cells += [ms(med(k, "seconds")), f"{statistics.median(ratios):.2f}"]
        print(f"| median | | {ms(med(base, 'seconds'))} | " + " | ".join(cells) + " |")
        for k in services:
            steady = [r for r in rounds if not r[k].get("first")]
            if len(steady) < len(rounds):  # a round that was a worker's first open: the others alone too
                ratios = [r[k]["seconds"] / r[base]["seconds"] for r in steady]
                print(f"{k}: {len(rounds) - len(steady)} round(s) a worker's first open; the other {len(steady)}: median "
                      + (f"{ms(statistics.median(r[k]['seconds'] for r in steady))} ms, ratio {statistics.median(ratios):.2f}"
                         if steady else "-"))
        for k in services:
            worst = max(r[k]["seconds"] for r in rounds)
            print(f"{k}: slowest open {ms(worst)} ms; ratio max {max(r[k]['seconds'] / r[base]['seconds'] for r in rounds):.2f}")


def whole_serve(argv: list[str]) -> int:
    """``policy-extender`` with onSessionOpen decoded whole after the body arrived (the service
    before ``wire.open_stream``): the streaming threshold is raised past any body in the master,
    before the workers fork."""
    from policy_extender.cli import main as cli
    from policy_extender.wire import open_stream
    open_stream.STREAM_FROM = 1 << 62
    return cli(argv)


def gthread_serve(argv: list[str]) -> int:
    """``policy-extender`` on gunicorn's own gthread worker: every connection handed to a thread
    at once, which reads the request (the service before ``web/worker.py``)."""
    from policy_extender import gunicorn_conf
    from policy_extender.cli import main as cli
    gunicorn_conf.WORKER_CLASS = "gthread"
    return cli(argv)


if __name__ == "__main__":
    sys.exit(main())
