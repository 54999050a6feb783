"""The benchmark scenarios: each a function of a ``Context`` that returns result rows.

A row is a dict with at least ``scenario`` and ``server`` (or ``what``); figures are medians over
``ctx.runs`` runs. Servers are started one at a time, so they never compete for the 2 cores.
"""

from __future__ import annotations

import importlib.util
import json
import statistics
import tempfile
import time
import timeit
from typing import Callable

import orjson

from bench.served import kube_scheduler
from bench.generate import Bodies, Cluster, write_snapshot
from bench.load import Pool, Result
from bench.runs import ALL_SERVERS, Context, load_run, medians
from bench.server import Server, reset_peak_rss, status_kb

def service_available() -> str | None:
    """None when the real service can run, else why not."""
    for module in ("policy_extender.policyset", "policy_extender.web"):
        if importlib.util.find_spec(module) is None:
            return f"{module} does not exist yet"
    return None


def servers_for(ctx: Context, wanted: tuple[str, ...]) -> list[str]:
    chosen = [s for s in wanted if s in ctx.servers]
    missing = service_available()
    if "service" in chosen and missing:
        ctx.notes.append(f"service not measured: {missing}")
        chosen.remove("service")
    if ctx.baseline and "service" in wanted:
        chosen.append("baseline")
    return chosen


def start(ctx: Context, kind: str) -> Server | None:
    try:
        if kind == "baseline":  # the service, from the other checkout's code
            return Server("service", ctx.workers, ctx.threads, root=ctx.baseline).start()
        return Server(kind, ctx.workers, ctx.threads).start()
    except RuntimeError as exc:
        ctx.notes.append(f"{kind} did not start: {str(exc).splitlines()[0]}")
        print(f"  {kind}: did not start: {exc}", flush=True)
        return None


def measure(ctx: Context, scenario: str, calls, concurrency: int, wanted=ALL_SERVERS, max_calls: int | None = None) -> dict:
    """Every server on the same calls, runs interleaved (bare, handwritten, ..., bare, ...) so
    drifting background load hits each alike, each round starting one server later; medians per
    server (and, with a baseline, the median of the per-round ratios: :func:`paired_ratios`)."""
    servers = {kind: s for kind in servers_for(ctx, wanted) if (s := start(ctx, kind)) is not None}
    runs: dict[str, list[dict]] = {kind: [] for kind in servers}
    try:
        for server in servers.values():
            load_run(server, calls, ctx, concurrency, max_calls=max_calls and max(1, max_calls // 4))   # warm-up
        order = list(servers.items())
        for round_number in range(ctx.runs):
            first = round_number % len(order)
            for kind, server in order[first:] + order[:first]:
                runs[kind].append(load_run(server, calls, ctx, concurrency, max_calls))
        for kind, server in servers.items():
            if any(r["errors"] for r in runs[kind]):
                ctx.notes.append(f"{scenario} on {kind}: non-200 answers; server log tail: {server.stderr_tail(400)}")
    finally:
        for server in servers.values():
            server.stop()
    by_server = {kind: medians(rows) for kind, rows in runs.items()}
    if "service" in runs and "baseline" in runs:
        by_server["service"].update(paired_ratios(runs["service"], runs["baseline"]))
    for kind, row in by_server.items():
        ctx.emit({"scenario": scenario, "server": kind, **row})
    add_ratios(ctx, scenario, by_server)
    return by_server


def paired_ratios(service: list[dict], baseline: list[dict]) -> dict:
    """The service against the baseline round by round (the two runs of a round are adjacent,
    so they share the machine's load): the median of the per-round ratios of req/s and of server
    CPU per call, and their lowest and highest."""
    rps = sorted(s["rps"] / b["rps"] for s, b in zip(service, baseline) if b["rps"])
    cpu = sorted(s["server_cpu_ms"] / b["server_cpu_ms"] for s, b in zip(service, baseline) if b["server_cpu_ms"])
    if not rps or not cpu:
        return {}
    return {"paired_rps_vs_baseline": statistics.median(rps), "paired_rps_low": rps[0], "paired_rps_high": rps[-1],
            "paired_cpu_vs_baseline": statistics.median(cpu), "paired_cpu_low": cpu[0], "paired_cpu_high": cpu[-1]}


def add_ratios(ctx: Context, scenario: str, by_server: dict) -> None:
    service = by_server.get("service")
    for floor in ("bare", "bare-socket"):
        base = by_server.get(floor)
        for kind, row in by_server.items():
            if kind not in ("bare", "bare-socket") and base and base["rps"]:
                row[f"rps_vs_{floor}"] = row["rps"] / base["rps"]
    for base in ("handwritten", "handwritten-wsgi", "baseline"):
        if service and base in by_server:
            service[f"cpu_vs_{base}"] = service["server_cpu_ms"] / by_server[base]["server_cpu_ms"]
    ratios = [f"{kind}.{k}={v:.2f}" for kind, row in by_server.items() for k, v in row.items() if k.startswith(("rps_vs", "cpu_vs"))]
    if ratios:
        ctx.emit({"scenario": scenario, "ratios": ", ".join(ratios)})


# --- scenarios ----------------------------------------------------------------------------------

def predicate_calls(bodies: Bodies, tasks: int = 4) -> list:
    jobs = bodies.cluster.spec.pending_job_count
    return [("predicate", "/predicate", body) for p in range(min(tasks, jobs)) for body in bodies.predicates(p)]


def predicate_scenario(pods: int) -> Callable[[Context], None]:
    def run(ctx: Context) -> None:
        bodies = Bodies(Cluster(ctx.spec(50, pods)))
        calls = predicate_calls(bodies)
        print(f"predicate, 50 nodes x {pods} pods/node: {len(calls)} bodies, median {statistics.median(len(c[2]) for c in calls) / 1e3:.0f} KB, "
              f"16 concurrent keep-alive connections", flush=True)
        measure(ctx, f"predicate-{pods}", calls, concurrency=16)
    return run


def prioritize_scenario(nodes: int, pods: int, calls_per_run: int) -> Callable[[Context], None]:
    def run(ctx: Context) -> None:
        bodies = Bodies(Cluster(ctx.spec(nodes, pods)))
        body = bodies.prioritize()
        print(f"prioritize over {bodies.cluster.spec.nodes} nodes x {pods} pods: body {len(body) / 1e6:.1f} MB, one call at a time", flush=True)
        calls = [("prioritize", "/prioritize", body)]
        measure(ctx, f"prioritize-{nodes}", calls, concurrency=1, wanted=("bare", "handwritten", "service"),
                max_calls=2 if ctx.quick else calls_per_run)
    return run


def open_scenario(nodes: int, pods: int, calls_per_run: int) -> Callable[[Context], None]:
    def run(ctx: Context) -> None:
        cluster = Cluster(ctx.spec(nodes, pods))
        with tempfile.NamedTemporaryFile(prefix=f"bench-snapshot-{nodes}x{pods}-", suffix=".json") as f:
            size = write_snapshot(cluster, f)
            f.flush()
            print(f"onSessionOpen {cluster.spec.nodes} nodes x {cluster.spec.pods_per_node} pods: body {size / 1e6:.1f} MB "
                  f"(streamed from {f.name}), one call at a time", flush=True)
            for kind in servers_for(ctx, ("bare", "service")):
                server = start(ctx, kind)
                if server is None:
                    continue
                with server:
                    runs = [open_once(server, f.name, size) for _ in range(1 if ctx.quick else calls_per_run)]
                row = {"scenario": f"open-{nodes}x{pods}", "server": kind, "body_mb": size / 1e6,
                       "seconds": statistics.median(r["seconds"] for r in runs),
                       "rss_growth_mb": statistics.median(r["growth_kb"] for r in runs) / 1024,
                       "rss_growth_vs_body": statistics.median(r["growth_kb"] for r in runs) * 1024 / size,
                       "errors": sum(r["status"] != 200 for r in runs)}
                ctx.emit(row)
    return run


def open_once(server: Server, path: str, size: int) -> dict:
    """One onSessionOpen (then onSessionClose); the answering worker's VmHWM growth over its RSS before."""
    workers = server.worker_pids()
    before = {}
    for pid in workers:
        reset_peak_rss(pid)
        before[pid] = status_kb(pid, "VmRSS")
    pool = Pool(server.host, server.port, 1)
    t0 = time.perf_counter()
    pool.call("onSessionOpen", "/onSessionOpen", path)
    seconds = time.perf_counter() - t0
    growth = max(status_kb(pid, "VmHWM") - before[pid] for pid in workers)
    pool.call("onSessionClose", "/onSessionClose", b"{}")
    status = 200 if not pool.result.errors else 500
    pool.close()
    return {"seconds": seconds, "growth_kb": growth, "status": status}


def cycle_scenario(ctx: Context) -> None:
    bodies = Bodies(Cluster(ctx.spec(50, 20)))
    spec = bodies.cluster.spec
    jobs = min(spec.pending_job_count, 4)
    snapshot = bodies.snapshot()
    print(f"whole cycle, {spec.nodes} nodes x {spec.pods_per_node} pods: snapshot {len(snapshot) / 1e6:.1f} MB, "
          f"{jobs} pending jobs x {spec.tasks_per_pending_job} tasks, predicates on 16 connections", flush=True)
    for kind in servers_for(ctx, ("bare", "handwritten", "service")):
        server = start(ctx, kind)
        if server is None:
            continue
        with server:
            walls, results = [], Result()
            for _ in range(ctx.runs):
                pool = Pool(server.host, server.port, 16)
                t0 = time.perf_counter()
                one_cycle(pool, bodies, snapshot, jobs)
                walls.append(time.perf_counter() - t0)
                pool.result.wall = walls[-1]
                results.merge(pool.result)
                pool.close()
        ctx.emit({"scenario": "cycle", "server": kind, "cycle_s": statistics.median(walls), "errors": sum(results.errors.values())})
        for verb in results.latencies:
            s = results.summary(verb)
            ctx.emit({"scenario": "cycle", "server": kind, "verb": verb, "n": s["n"], "p50_ms": s["p50"] * 1e3,
                      "p99_ms": s["p99"] * 1e3, "max_ms": s["max"] * 1e3, "errors": s["errors"]})


def one_cycle(pool: Pool, bodies: Bodies, snapshot: bytes, jobs: int) -> None:
    """Every verb in the scheduler's order: open, enqueue, overused, predicates, prioritize,
    allocate, ready, preemptable, reclaimable, deallocate, close."""
    cluster = bodies.cluster
    pool.call("onSessionOpen", "/onSessionOpen", snapshot)
    for p in range(jobs):
        pool.call("jobEnqueueable", "/jobEnqueueable", bodies.job(p))
        pool.call("queueOverused", "/queueOverused", bodies.queue(cluster.job_meta("pending", p).queue))
        for t in range(cluster.spec.tasks_per_pending_job):
            task = bodies.task(p, t)
            answers = pool.map(("predicate", "/predicate", b'{"task":' + task + b',"node":' + cluster.node_bytes(i) + b"}")
                               for i in range(cluster.spec.nodes))
            feasible = [i for i, a in enumerate(answers) if a and not orjson.loads(a).get("status")]
            if not feasible:
                continue
            scores = orjson.loads(pool.call("prioritize", "/prioritize", bodies.prioritize(feasible, p, t)) or b"{}").get("nodeScore") or {}
            best = max(feasible, key=lambda i: scores.get(cluster.node_names[i], 0))
            pool.call("allocateFunc", "/allocateFunc", bodies.allocate(p, t, best))
        pool.call("jobReady", "/jobReady", bodies.job(p, status=2))
    pool.call("preemptable", "/preemptable", bodies.victims(0, 0))
    pool.call("reclaimable", "/reclaimable", bodies.victims(1 % jobs, 1))
    pool.call("deallocateFunc", "/deallocateFunc", bodies.allocate(0, 0, 0))
    pool.call("onSessionClose", "/onSessionClose", b"{}")


# --- in-process figures ---------------------------------------------------------------------

def per_call(fn, budget: float) -> float:
    """Median seconds per call of ``fn`` over 5 timed batches within about ``budget`` seconds."""
    t = timeit.timeit(fn, number=1)
    number = max(1, int(budget / 5 / max(t, 1e-7)))
    return statistics.median(timeit.repeat(fn, number=number, repeat=5)) / number


def decode_scenario(ctx: Context) -> None:
    from bench.handwritten import READS
    from policy_extender.wire import decode as wire
    snapshot_decode = _snapshot_decoder()
    cases = []
    for pods in (20, 50):
        bodies = Bodies(Cluster(ctx.spec(50, pods)))
        cases.append((f"predicate 50x{pods}", bodies.predicate(3), lambda b: wire.decode_predicate(b, READS)))
    bodies = Bodies(Cluster(ctx.spec(50, 20)))
    cases.append(("prioritize 50x20", bodies.prioritize(), lambda b: wire.decode_prioritize(b, READS)))
    cases.append(("onSessionOpen 50x20", bodies.snapshot(), snapshot_decode))
    budget = 0.2 if ctx.quick else 1.5
    for name, body, pruned in cases:
        row = {"scenario": "decode", "body": name, "kb": len(body) / 1e3,
               "json_ms": per_call(lambda: json.loads(body), budget) * 1e3,
               "orjson_ms": per_call(lambda: orjson.loads(body), budget) * 1e3}
        if pruned is not None:
            row["pruned_msgspec_ms"] = per_call(lambda: pruned(body), budget) * 1e3
            row["json_vs_pruned"] = row["json_ms"] / row["pruned_msgspec_ms"]
        ctx.emit(row)


def _snapshot_decoder():
    """The service's onSessionOpen decoding with the benchmark policy's reads, when it exists."""
    try:
        from bench.handwritten import READS
        from policy_extender.wire import snapshot
    except ImportError:
        return None
    return lambda body: snapshot.from_open_body(body, READS)


def policy_rules(count: int) -> str:
    """``count`` rules cycling through the benchmark's three kinds, each evaluated on every node."""
    rules = []
    for i in range(count):
        kind = i % 3
        if kind == 0:
            rules.append(f'filter zone_{i}: node.labels["topology.kubernetes.io/zone"] != "zone-x{i}"')
        elif kind == 1:
            rules.append(f"filter gpu_{i}: free_gpu + {i} >= task.requests.gpu")
        else:
            rules.append(f"score pack_{i}: {i} * (node.allocatable.gpu - free_gpu + task.requests.gpu)")
    return "\n".join(rules) + "\n"


def policy_eval_scenario(ctx: Context) -> None:
    try:
        from policy_extender.policyset import compile_sources
        from policy_extender.wire import decode as wire
        from policy_extender.wire.views import NO_SESSION
    except ImportError as exc:
        ctx.notes.append(f"policy-eval not measured: {exc}")
        print(f"  policy-eval: not measured ({exc})", flush=True)
        return
    bodies = Bodies(Cluster(ctx.spec(50, 20)))
    budget = 0.2 if ctx.quick else 1.0
    for count in (1, 10, 50):
        ps = compile_sources({"bench.policy": policy_rules(count)})
        req = wire.decode_prioritize(bodies.prioritize(), ps.reads)
        nodes = req.nodes
        filters = sum(1 for r in ps.rules if r.kind == "filter")
        scores = len(ps.rules) - filters
        pred = per_call(lambda: [ps.predicate(req.task, n, NO_SESSION) for n in nodes], budget)
        prio = per_call(lambda: ps.prioritize(req.task, nodes, NO_SESSION), budget)
        ctx.emit({"scenario": "policy-eval", "rules": count, "nodes": len(nodes),
                  "predicate_us_per_node": pred / len(nodes) * 1e6,
                  "filter_us_per_rule_node": pred / len(nodes) / max(filters, 1) * 1e6,
                  "prioritize_us_per_node": prio / len(nodes) * 1e6,
                  "score_us_per_rule_node": prio / len(nodes) / max(scores, 1) * 1e6 if scores else 0.0})


#: Volcano's extender client is Go's default transport: MaxIdleConnsPerHost 2
VOLCANO_IDLE_CONNECTIONS = 2


def connection_pattern_scenario(pods: int) -> Callable[[Context], None]:
    """Predicates the way Volcano fans them out, two ways, same servers, runs interleaved: 16
    parallel callers take one task's predicates over the 50 nodes, wait until all are answered,
    then the next task's (``load.Bursts``); each caller on its own keep-alive connection, or with
    Volcano's client's pool (at most 2 idle connections kept, so at the start of each fan-out
    most of the 16 callers dial a new connection, and at its end all but 2 are closed)."""
    def run(ctx: Context) -> None:
        bodies = Bodies(Cluster(ctx.spec(50, pods)))
        calls = predicate_calls(bodies)
        nodes = bodies.cluster.spec.nodes
        modes = {"keep-alive": None, f"{VOLCANO_IDLE_CONNECTIONS}-idle": VOLCANO_IDLE_CONNECTIONS}
        print(f"predicate, {nodes} nodes x {pods} pods/node: {len(calls)} bodies; 16 parallel callers in one client "
              f"process answer one task's {nodes} predicates, wait for all of them, then take the next task's; "
              f"'keep-alive': a connection per caller; '{VOLCANO_IDLE_CONNECTIONS}-idle': the callers share connections "
              f"and at most {VOLCANO_IDLE_CONNECTIONS} stay idle (Go's MaxIdleConnsPerHost default, Volcano's client): "
              f"a call with no idle connection dials one, a connection that finds {VOLCANO_IDLE_CONNECTIONS} idle after "
              "its answer is closed", flush=True)
        scenario = f"predicate-{pods}-connections"
        servers = {kind: s for kind in servers_for(ctx, ("bare", "handwritten-wsgi", "service")) if (s := start(ctx, kind)) is not None}
        runs: dict[tuple, list[dict]] = {(kind, mode): [] for kind in servers for mode in modes}
        try:
            for server in servers.values():
                for idle in modes.values():
                    load_run(server, calls, ctx, 16, max_idle=idle, burst=nodes)   # warm-up
            for _ in range(ctx.runs):
                for kind, server in servers.items():
                    for mode, idle in modes.items():
                        runs[(kind, mode)].append(load_run(server, calls, ctx, 16, max_idle=idle, burst=nodes))
        finally:
            for server in servers.values():
                server.stop()
        for (kind, mode), rows in runs.items():
            ctx.emit({"scenario": scenario, "server": kind, "connections": mode, **medians(rows)})
    return run


SCENARIOS: dict[str, Callable[[Context], None]] = {
    "decode": decode_scenario,
    "predicate-20": predicate_scenario(20),
    "predicate-50": predicate_scenario(50),
    "predicate-20-connections": connection_pattern_scenario(20),
    "prioritize-50": prioritize_scenario(50, 20, 20),
    "prioritize-500": prioritize_scenario(500, 30, 3),
    "open-50x20": open_scenario(50, 20, 5),
    "open-500x30": open_scenario(500, 30, 3),
    "cycle": cycle_scenario,
    "policy-eval": policy_eval_scenario,
}
SCENARIOS.update(kube_scheduler.SCENARIOS)  # kube-filter-100 ... kube-prioritize-1000
