"""Benchmark: memory and CPU of ``policy-extender serve`` per cluster size, for requests/limits.

    python tests/ops/bench_sizing.py                 # 50x20 200x30 500x30 1000x30
    python tests/ops/bench_sizing.py 50x20 500x30    # NODESxPODS_PER_NODE

Prints figures only (docs/operations.md "Sizing" quotes them). Method, per cluster size:

1. A synthetic onSessionOpen body of that size (``bench.generate``, the wire shape of Volcano's
   snapshot) is streamed to a temporary file.
2. ``policy-extender serve`` starts as the manifests run it: 2 gthread workers x 8 threads, the
   shipped policies (``policies/``, what ``docker/k8s/policies/configmap.yaml`` holds), SQLite sessions, multiprocess metrics.
3. Idle: RSS and PSS (``/proc/PID/smaps_rollup``) of the master and of each worker.
4. Each worker's peak (``VmHWM``) is reset (``/proc/PID/clear_refs`` 5); one onSessionOpen of the
   body; the wall time, the CPU seconds the master and workers spent on it (``/proc/PID/stat``)
   and each worker's peak RSS are read.
5. 400 predicate calls of the cycle on 16 keep-alive connections (every worker then holds its
   own decoded copy of the snapshot): RSS/PSS and peak of every process, CPU ms per call.
6. onSessionClose, then a second open and close of the same body: RSS after, peak of the second
   open (does memory come back, or does it grow per cycle?).

The session store's files (SQLite, the pruned snapshot the workers share) are sized after the
open: in the sidecar they sit on the pod's volume, in the standalone mode in Redis.

``pod peak`` = the master's RSS + the sum of the workers' peaks: an upper bound of what the
container's memory cgroup sees (pages shared after the fork are counted once per process).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from bench.generate import Bodies, Cluster, ClusterSpec, write_snapshot  # noqa: E402
from bench.load import Connection, Pool  # noqa: E402
from bench.server import children, free_port, process_cpu, reset_peak_rss, status_kb  # noqa: E402

SIZES = ("50x20", "200x30", "500x30", "1000x30")
WORKERS, THREADS = 2, 8


def pss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        if line.startswith("Pss:"):
            return int(line.split()[1])
    return 0


def mb(kb: int) -> str:
    return f"{kb / 1024:.0f}"


class Service:
    def __init__(self, workdir: Path):
        self.port = free_port()
        env = {**os.environ, "POLICY_EXTENDER_BIND": f"127.0.0.1:{self.port}",
               "POLICY_EXTENDER_WORKERS": str(WORKERS), "POLICY_EXTENDER_THREADS": str(THREADS),
               "POLICY_EXTENDER_POLICY_DIRS": str(ROOT / "policies"),
               "POLICY_EXTENDER_SESSION_STORE": f"sqlite:{workdir / 'sessions.sqlite'}",
               "POLICY_EXTENDER_LOG_LEVEL": "warning", "POLICY_EXTENDER_RELOAD_INTERVAL": "0",
               "PROMETHEUS_MULTIPROC_DIR": str(workdir / "metrics")}
        self.stderr = open(workdir / "stderr", "wb")
        self.proc = subprocess.Popen([sys.executable, "-m", "policy_extender", "serve"], env=env, cwd=workdir,
                                     stdout=subprocess.DEVNULL, stderr=self.stderr, start_new_session=True)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if (Connection("127.0.0.1", self.port, timeout=2).request("/onSessionClose", b"{}")[0] == 200
                        and len(self.workers()) == WORKERS):
                    time.sleep(1)  # both workers loaded their policies
                    return
            except OSError:
                pass
            time.sleep(0.2)
        raise RuntimeError("service did not start: " + (workdir / "stderr").read_text()[-2000:])

    def workers(self) -> list[int]:
        return children(self.proc.pid)

    def pids(self) -> list[int]:
        return [self.proc.pid, *self.workers()]

    def cpu(self) -> float:
        return sum(process_cpu(pid) for pid in self.pids())

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


def memory_line(service: Service, what: str) -> str:
    master = service.proc.pid
    workers = service.workers()
    rss = [status_kb(pid, "VmRSS") for pid in workers]
    hwm = [status_kb(pid, "VmHWM") for pid in workers]
    pss = sum(pss_kb(pid) for pid in service.pids())
    return (f"    {what:28} master RSS {mb(status_kb(master, 'VmRSS'))} MB; workers RSS "
            f"{'/'.join(mb(r) for r in rss)} MB, peak {'/'.join(mb(h) for h in hwm)} MB; "
            f"pod PSS {mb(pss)} MB, pod peak <= {mb(status_kb(master, 'VmRSS') + sum(hwm))} MB")


def measure(nodes: int, pods: int) -> None:
    cluster = Cluster(ClusterSpec(nodes=nodes, pods_per_node=pods))
    bodies = Bodies(cluster)
    with tempfile.TemporaryDirectory(prefix="bench-sizing-") as tmp:
        workdir = Path(tmp)
        snapshot = workdir / "snapshot.json"
        with open(snapshot, "wb") as f:
            size = write_snapshot(cluster, f)
        jobs = cluster.spec.pending_job_count
        predicates = [b for p in range(min(jobs, 8)) for b in bodies.predicates(p)][:400]
        print(f"{nodes} nodes x {pods} pods/node: onSessionOpen body {size / 1e6:.1f} MB, "
              f"{len(predicates)} predicate bodies of {len(predicates[0]) / 1e3:.0f} KB", flush=True)
        service = Service(workdir)
        try:
            print(memory_line(service, "idle"))
            for pid in service.workers():
                reset_peak_rss(pid)
            cpu, t0 = service.cpu(), time.perf_counter()
            status, _ = Connection("127.0.0.1", service.port, timeout=300).request("/onSessionOpen", str(snapshot))
            wall, cpu = time.perf_counter() - t0, service.cpu() - cpu
            assert status == 200, f"onSessionOpen answered {status}"
            store = sum(f.stat().st_size for f in workdir.glob("sessions.sqlite*"))
            print(f"    onSessionOpen: {wall:.2f} s wall, {cpu:.2f} CPU s; session store files {store / 1e6:.1f} MB")
            print(memory_line(service, "after the open"))
            pool = Pool("127.0.0.1", service.port, 16)
            cpu, t0 = service.cpu(), time.perf_counter()
            pool.map([("predicate", "/predicate", body) for body in predicates])
            wall, cpu = time.perf_counter() - t0, service.cpu() - cpu
            pool.close()
            errors = sum(pool.result.errors.values())
            print(f"    {len(predicates)} predicates: {wall:.2f} s wall, {cpu / len(predicates) * 1e3:.2f} CPU ms/call, "
                  f"{errors} errors")
            print(memory_line(service, "after the predicates"))
            Connection("127.0.0.1", service.port).request("/onSessionClose", b"{}")
            print(memory_line(service, "after the close"))
            for pid in service.workers():
                reset_peak_rss(pid)
            conn = Connection("127.0.0.1", service.port, timeout=300)
            conn.request("/onSessionOpen", str(snapshot))
            conn.request("/onSessionClose", b"{}")
            print(memory_line(service, "second open + close"), flush=True)
        finally:
            service.stop()


def main(argv: list[str]) -> None:
    print(f"policy-extender serve, {WORKERS} workers x {THREADS} threads, policies policies/, "
          f"nproc {os.cpu_count()}, Python {sys.version.split()[0]}")
    for size in argv or SIZES:
        nodes, pods = (int(x) for x in size.split("x"))
        measure(nodes, pods)


if __name__ == "__main__":
    main(sys.argv[1:])
