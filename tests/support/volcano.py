"""A client that calls the service the way Volcano's extender plugin does, and a real server.

``VolcanoClient``: one keep-alive HTTP/1.1 connection per calling thread (Go's transport pools
connections the same way), ``Content-Type: application/json``, a timeout, and a non-200 answer
treated as an error. ``parallel`` runs calls on ``workers`` threads at once, as Volcano's 16
predicate workers do. ``Server`` runs ``python -m policy_extender serve`` (real gunicorn) on a
free loopback port and always stops it.
"""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

REPO = Path(__file__).parents[2]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class VolcanoClient:
    def __init__(self, port: int, timeout: float = 10.0, workers: int = 16) -> None:
        self.port, self.timeout = port, timeout
        self._local = threading.local()
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="predicate-worker")
        self.workers = workers

    def close(self) -> None:
        self._pool.shutdown(wait=True)

    def _conn(self) -> http.client.HTTPConnection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._local.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=self.timeout)
        return conn

    def raw(self, verb: str, body: bytes, fresh: bool = False) -> tuple[int, bytes]:
        """POST ``body`` to ``/<verb>`` on this thread's keep-alive connection (or a new one)."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=self.timeout) if fresh else self._conn()
        try:
            conn.request("POST", "/" + verb, body=body, headers={"Content-Type": "application/json"})
            response = conn.getresponse()
            return response.status, response.read()
        except (OSError, http.client.HTTPException):
            conn.close()
            self._local.conn = None
            raise
        finally:
            if fresh:
                conn.close()

    def call(self, verb: str, body: Any, fresh: bool = False) -> Any:
        """The decoded answer; a non-200 is an error, as for Volcano."""
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        status, answer = self.raw(verb, data, fresh)
        if status != 200:
            raise AssertionError(f"{verb} answered {status}: {answer[:300]!r}")
        return json.loads(answer) if answer else None

    def parallel(self, verb: str, bodies: list, fresh: bool = False) -> list:
        return list(self._pool.map(lambda body: self.call(verb, body, fresh), bodies))

    def parallel_map(self, function, items: Iterable) -> list:
        """``function(item)`` for every item, ``workers`` at once (each thread its connection)."""
        return list(self._pool.map(function, items))

    def parallel_get(self, path: str, times: int) -> list[dict]:
        """``GET path`` ``times`` times, 16 at once, each on a new connection."""
        return list(self._pool.map(lambda _: self.get(path)[1], range(times)))

    def get(self, path: str) -> tuple[int, dict]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=self.timeout)
        try:
            conn.request("GET", path)
            response = conn.getresponse()
            return response.status, json.loads(response.read())
        finally:
            conn.close()


class Server:
    """``policy-extender serve`` with ``workers`` gunicorn workers on a free loopback port.

    The one harness for every test that needs the real service (web, reload, replay, reliability,
    soak): ``extra_args`` adds serve flags, ``pythonpath`` goes before the repository on
    ``PYTHONPATH`` (the reload tests hide watchdog that way), ``launcher`` is the module (and its
    arguments) run with ``python -m`` instead of ``policy_extender`` (``tests.served.gc_probe_serve``). Without ``session_store`` each
    server gets a SQLite file of its own; ``instance_defaults`` instead leaves the session store
    and ``PROMETHEUS_MULTIPROC_DIR`` unset, as a user who just runs ``serve`` does.
    """

    def __init__(self, state_dir: Path, policy_dir: Path, session_store: str | None = None, workers: int = 2,
                 threads: int = 8, extra_args: tuple[str, ...] = (), reload_interval: float = 0.0,
                 pythonpath: str = "", instance_defaults: bool = False, launcher: tuple[str, ...] = ()) -> None:
        state_dir = Path(state_dir)
        self.port = free_port()
        self.workers = workers
        self.log_path = state_dir / f"server-{self.port}.log"
        session_store = session_store or f"sqlite:{state_dir / f'sessions-{self.port}.sqlite'}"
        store_args = () if instance_defaults else ("--session-store", session_store)
        args = [sys.executable, "-m", *(launcher or ("policy_extender",)), "serve", "--bind", f"127.0.0.1:{self.port}",
                "--workers", str(workers), "--threads", str(threads), "--policy-dirs", str(policy_dir),
                *store_args, "--reload-interval", str(reload_interval), *extra_args]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [pythonpath, str(REPO)])),
               "PROMETHEUS_MULTIPROC_DIR": str(state_dir / f"metrics-{self.port}")}
        if instance_defaults:
            env.pop("PROMETHEUS_MULTIPROC_DIR")
            env.pop("POLICY_EXTENDER_SESSION_STORE", None)
        self._log = open(self.log_path, "wb")
        self.process = subprocess.Popen(args, cwd=state_dir, env=env, stdout=self._log, stderr=subprocess.STDOUT)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_ready(self, timeout: float = 30.0) -> None:
        """Until /readyz answers 200 from every worker (asked on new connections)."""
        client = VolcanoClient(self.port, timeout=2)
        ready: set[int] = set()
        deadline = time.monotonic() + timeout
        try:
            while len(ready) < self.workers and time.monotonic() < deadline:
                if self.process.poll() is not None:
                    raise RuntimeError(f"server exited with {self.process.returncode}:\n{self.log()}")
                try:
                    if client.get("/readyz")[0] == 200:
                        ready.add(client.get("/status")[1]["pid"])
                        continue
                except OSError:
                    pass
                time.sleep(0.05)
        finally:
            client.close()
        if not ready:
            raise TimeoutError(f"server not ready after {timeout}s:\n{self.log()}")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._log.close()


class RedisServer:
    """A real ``redis-server`` on a free loopback port, no persistence."""

    def __init__(self, state_dir: Path) -> None:
        self.port, self.state_dir = free_port(), state_dir
        self._start()

    def restart(self) -> None:
        """Stop it and start it again on the same port, empty (no persistence)."""
        self.stop()
        self._start()

    def pause(self) -> None:
        self.process.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        self.process.send_signal(signal.SIGCONT)

    def _start(self) -> None:
        self.process = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", str(self.state_dir)],
            stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise TimeoutError("redis-server did not start")

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def stop(self) -> None:
        self.resume()
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


@contextmanager
def served(state_dir: Path, policy_dir: Path, store_kind: str, workers: int = 2,
           extra_args: Iterable[str] = ()) -> Iterator[Server]:
    """A ready ``Server`` on a SQLite file of its own or on a real redis-server of its own
    (``store_kind`` "sqlite" or "redis"), both always stopped; ``extra_args`` go to ``serve``."""
    redis = RedisServer(state_dir) if store_kind == "redis" else None
    store = redis.url if redis else f"sqlite:{Path(state_dir) / 'sessions.sqlite3'}"
    srv = Server(state_dir, policy_dir, store, workers=workers, extra_args=tuple(extra_args))
    try:
        srv.wait_ready()
        yield srv
    finally:
        srv.stop()
        if redis:
            redis.stop()


def metric_samples(port: int) -> dict[tuple, float]:
    """Every sample of the server's /metrics: (name, sorted label pairs) -> value."""
    from prometheus_client.parser import text_string_to_metric_families

    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.request("GET", "/metrics")
        text = connection.getresponse().read().decode()
    finally:
        connection.close()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def body_maps(port: int) -> dict[str, float]:
    """``policy_extender_body_maps_total`` by source (``new``, ``kept``) from the server's /metrics."""
    return {dict(labels)["source"]: value for (name, labels), value in metric_samples(port).items()
            if name == "policy_extender_body_maps_total"}


def traced_calls(path: Path, verb: str, count: int, wait: float = 10.0) -> list[dict]:
    """The ``POLICY_EXTENDER_TRACE`` request lines of ``verb`` in ``path``, once there are
    ``count`` of them (the workers write theirs every metrics flush) or ``wait`` seconds passed."""
    deadline, lines = time.monotonic() + wait, []
    while time.monotonic() < deadline:
        lines = [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
        lines = [line for line in lines if line["kind"] == "request" and line["verb"] == verb]
        if len(lines) >= count:
            break
        time.sleep(0.3)
    return lines


class SentinelCluster:
    """A real Redis master, one replica and three ``redis-sentinel`` processes watching them,
    all on free loopback ports. ``down_after_ms`` and ``failover_timeout_ms`` are kept low so a
    failover takes a few seconds. ``url`` is the store's Sentinel address."""

    MASTER_NAME = "mymaster"

    def __init__(self, state_dir: Path, down_after_ms: int = 500, failover_timeout_ms: int = 2000) -> None:
        import shutil

        if shutil.which("redis-sentinel") is None:
            raise RuntimeError("redis-sentinel is not installed (apt-get install redis-sentinel; "
                               "scripts/test and .ci/run do)")
        self.state_dir = Path(state_dir)
        self.processes: list[subprocess.Popen] = []
        try:
            self.master_port, self.replica_port = free_port(), free_port()
            self.master = self._redis(self.master_port)
            self.replica = self._redis(self.replica_port, "--replicaof", "127.0.0.1", str(self.master_port))
            self.sentinel_ports = []
            for _ in range(3):
                port = free_port()
                conf = self.state_dir / f"sentinel-{port}.conf"  # each sentinel rewrites its own file
                conf.write_text(
                    f"port {port}\nbind 127.0.0.1\ndir {self.state_dir}\n"
                    f"sentinel monitor {self.MASTER_NAME} 127.0.0.1 {self.master_port} 2\n"
                    f"sentinel down-after-milliseconds {self.MASTER_NAME} {down_after_ms}\n"
                    f"sentinel failover-timeout {self.MASTER_NAME} {failover_timeout_ms}\n"
                    f"sentinel parallel-syncs {self.MASTER_NAME} 1\n")
                self.processes.append(subprocess.Popen(["redis-sentinel", str(conf)], stdout=subprocess.DEVNULL,
                                                       stderr=subprocess.STDOUT))
                _wait_for_port(port)
                self.sentinel_ports.append(port)
            self._wait_until_watched()
        except BaseException:
            self.stop()
            raise

    def _redis(self, port: int, *extra: str) -> subprocess.Popen:
        process = subprocess.Popen(
            ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--dir", str(self.state_dir), *extra], stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        self.processes.append(process)
        _wait_for_port(port)
        return process

    @property
    def url(self) -> str:
        hosts = ",".join(f"127.0.0.1:{port}" for port in self.sentinel_ports)
        return f"redis+sentinel://{hosts}/{self.MASTER_NAME}/0"

    def sentinel_view(self, port: int) -> dict:
        import redis

        client = redis.Redis(host="127.0.0.1", port=port, socket_timeout=2)
        try:
            return client.sentinel_master(self.MASTER_NAME)  # type: ignore[return-value]  # a dict for one master
        finally:
            client.close()

    def _wait_until_watched(self, timeout: float = 30.0) -> None:
        """Until the replica is in sync and every sentinel knows it and the two other sentinels
        (they find each other through the master every 2 s): before that no failover can be
        agreed on."""
        import redis

        replica = redis.Redis(host="127.0.0.1", port=self.replica_port, socket_timeout=2)
        deadline = time.monotonic() + timeout
        try:
            while True:
                views = [self.sentinel_view(port) for port in self.sentinel_ports]
                synced = replica.info("replication").get("master_link_status") == "up"
                if synced and all(v["num-slaves"] >= 1 and v["num-other-sentinels"] >= 2 for v in views):
                    return
                if time.monotonic() > deadline:
                    raise TimeoutError(f"the sentinels did not settle: {views}")
                time.sleep(0.1)
        finally:
            replica.close()

    def kill_master(self) -> None:
        """SIGKILL the master (nothing is flushed, nothing said to the clients)."""
        self.master.send_signal(signal.SIGKILL)
        self.master.wait()

    def restart_killed_master(self, timeout: float = 60.0) -> None:
        """Start the killed master again, empty, on its port (as Kubernetes restarts a pod): the
        sentinels make it a replica of the new master (after it answered as a master for 8 s,
        Sentinel's rule: 10-20 s on a loaded machine); returns once it is in sync and
        acknowledges writes (a write on the new master and ``WAIT 1`` succeed)."""
        import redis

        self.master = self._redis(self.master_port)
        client = redis.Redis(host="127.0.0.1", port=self.master_port, socket_timeout=2)
        new_master = redis.Redis(host="127.0.0.1", port=self.replica_port, socket_timeout=5)
        deadline = time.monotonic() + timeout
        try:
            while client.info("replication").get("master_link_status") != "up":
                if time.monotonic() > deadline:
                    raise TimeoutError(f"the old master did not become a replica in {timeout}s")
                time.sleep(0.1)
            while True:
                new_master.set("sentinel-cluster:probe", time.time())
                if new_master.wait(1, 1000) >= 1:
                    return
                if time.monotonic() > deadline:
                    raise TimeoutError(f"the old master did not acknowledge writes in {timeout}s")
        finally:
            client.close()
            new_master.close()

    def restart_killed_master_as_replica(self, timeout: float = 60.0) -> None:
        """Start the killed master again, empty, as a replica of the promoted one (as the
        redis-sentinel pods' start script does); returns once it is in sync."""
        import redis

        self.master = self._redis(self.master_port, "--replicaof", "127.0.0.1", str(self.replica_port))
        client = redis.Redis(host="127.0.0.1", port=self.master_port, socket_timeout=2)
        deadline = time.monotonic() + timeout
        try:
            while client.info("replication").get("master_link_status") != "up":
                if time.monotonic() > deadline:
                    raise TimeoutError(f"the old master did not sync as a replica in {timeout}s")
                time.sleep(0.1)
        finally:
            client.close()

    def wait_for_failover(self, timeout: float = 30.0) -> float:
        """Until every sentinel names the replica as the master; returns the seconds it took."""
        started = time.monotonic()
        while True:
            views = [self.sentinel_view(port) for port in self.sentinel_ports]
            if all(v["port"] == self.replica_port and v["is_master"] and not v["is_sdown"] for v in views):
                return time.monotonic() - started
            if time.monotonic() - started > timeout:
                raise TimeoutError(f"no failover after {timeout}s: {views}")
            time.sleep(0.05)

    def stop(self) -> None:
        for process in reversed(self.processes):
            if process.poll() is None:
                process.terminate()
        for process in self.processes:
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _wait_for_port(port: int, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise TimeoutError(f"nothing listens on 127.0.0.1:{port} after {timeout}s") from None
            time.sleep(0.05)
