"""A scheduler-like HTTP client: keep-alive HTTP/1.1 connections on raw sockets.

``Connection`` sends prebuilt request bytes and reads one response (Content-Length framing), the
way Go's ``net/http`` keeps a connection per concurrent call. ``drive`` keeps ``concurrency``
callers busy for a while over a list of calls, in ``procs`` forked client processes of threads
each, and returns per-verb latencies, error counts, the connections it opened and the client's
own CPU time (so a report can show the client is not the bottleneck). By default each caller
keeps its own keep-alive connection; with ``max_idle`` the callers share an ``IdlePool`` that,
like Go's default ``http.Transport`` (``MaxIdleConnsPerHost`` 2, which Volcano's extender client
uses), keeps at most that many idle connections: a call takes an idle one or dials a new one,
and after the answer the connection goes back to the pool only if fewer than ``max_idle`` are
idle, else it is closed. ``Pool`` runs calls on a fixed set of connections for the step-by-step
scheduling cycle.
"""

from __future__ import annotations

import multiprocessing
import os
import resource
import socket
import statistics
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Iterable, Sequence

#: (verb, path, body bytes or a file path to stream)
Call = tuple[str, str, "bytes | str"]


class HttpFailure(Exception):
    pass


class Connection:
    """One keep-alive HTTP/1.1 connection to ``host:port``; reconnects when the server closes."""

    def __init__(self, host: str, port: int, timeout: float = 60.0):
        self.host, self.port, self.timeout = host, port, timeout
        self.sock: socket.socket | None = None
        self.buffer = b""

    def _connect(self) -> socket.socket:
        sock = socket.create_connection((self.host, self.port), timeout=self.timeout)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buffer = b""
        return sock

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None

    def request(self, path: str, body: bytes | str) -> tuple[int, bytes]:
        """POSTs ``body`` (bytes, or the path of a file to stream) and returns (status, body)."""
        if self.sock is None:
            self.sock = self._connect()
        try:
            return self._exchange(path, body)
        except (ConnectionError, HttpFailure):
            self.close()                 # the server closed an idle keep-alive connection: retry once
            self.sock = self._connect()
            return self._exchange(path, body)

    def _exchange(self, path: str, body: bytes | str) -> tuple[int, bytes]:
        size = os.path.getsize(body) if isinstance(body, str) else len(body)
        head = (f"POST {path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\nContent-Type: application/json\r\n"
                f"Content-Length: {size}\r\n\r\n").encode()
        if isinstance(body, str):
            self.sock.sendall(head)
            with open(body, "rb") as f:
                self.sock.sendfile(f)
        else:
            self.sock.sendall(head + body if size < 65536 else head)
            if size >= 65536:
                self.sock.sendall(body)
        return self._read_response()

    def _read_response(self) -> tuple[int, bytes]:
        while b"\r\n\r\n" not in self.buffer:
            self._fill()
        head, _, rest = self.buffer.partition(b"\r\n\r\n")
        lines = head.split(b"\r\n")
        status = int(lines[0].split(b" ", 2)[1])
        headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(b":") for line in lines[1:])}
        length = int(headers.get(b"content-length", b"0"))
        while len(rest) < length:
            rest += self._recv()
        self.buffer = rest[length:]
        if headers.get(b"connection", b"").lower() == b"close":
            self.close()
        return status, rest[:length]

    def _recv(self) -> bytes:
        data = self.sock.recv(1 << 16)
        if not data:
            raise HttpFailure("connection closed by the server")
        return data

    def _fill(self) -> None:
        self.buffer += self._recv()


class IdlePool:
    """Connections shared by the callers of one process, at most ``max_idle`` kept idle (Go's
    ``http.Transport.MaxIdleConnsPerHost``; its default, 2, is what Volcano's client gets)."""

    def __init__(self, host: str, port: int, max_idle: int):
        self.host, self.port, self.max_idle = host, port, max_idle
        self.idle: list[Connection] = []
        self.lock = threading.Lock()
        self.dials = 0

    def request(self, path: str, body: bytes | str) -> tuple[int, bytes]:
        with self.lock:
            conn = self.idle.pop() if self.idle else None
            if conn is None:
                self.dials += 1
        conn = conn or Connection(self.host, self.port)
        try:
            answer = conn.request(path, body)
        except Exception:
            conn.close()
            raise
        with self.lock:
            keep = conn.sock is not None and len(self.idle) < self.max_idle
            if keep:
                self.idle.append(conn)
        if not keep:
            conn.close()
        return answer

    def close(self) -> None:
        with self.lock:
            idle, self.idle = self.idle, []
        for conn in idle:
            conn.close()


# --- results ---------------------------------------------------------------------------------

@dataclass
class Result:
    latencies: dict[str, list[float]] = field(default_factory=dict)
    errors: dict[str, int] = field(default_factory=dict)
    wall: float = 0.0
    client_cpu: float = 0.0
    connections: int = 0   # connections the client opened (without reconnects)

    def add(self, verb: str, seconds: float, ok: bool) -> None:
        self.latencies.setdefault(verb, []).append(seconds)
        if not ok:
            self.errors[verb] = self.errors.get(verb, 0) + 1

    def merge(self, other: "Result") -> None:
        for verb, values in other.latencies.items():
            self.latencies.setdefault(verb, []).extend(values)
        for verb, count in other.errors.items():
            self.errors[verb] = self.errors.get(verb, 0) + count
        self.wall = max(self.wall, other.wall)
        self.client_cpu += other.client_cpu
        self.connections += other.connections

    @property
    def requests(self) -> int:
        return sum(len(v) for v in self.latencies.values())

    def rate(self) -> float:
        return self.requests / self.wall if self.wall else 0.0

    def summary(self, verb: str) -> dict:
        values = sorted(self.latencies.get(verb, []))
        if not values:
            return {"n": 0}
        pick = lambda q: values[min(len(values) - 1, int(q * len(values)))]   # noqa: E731
        return {"n": len(values), "rps": len(values) / self.wall if self.wall else 0.0,
                "p50": statistics.median(values), "p90": pick(0.90), "p99": pick(0.99), "max": values[-1],
                "errors": self.errors.get(verb, 0)}


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


# --- a fixed-duration closed loop -----------------------------------------------------------

def _loop(host: str, port: int, calls: Sequence[Call], start: int, deadline: float, max_calls: int | None,
          result: Result, lock: threading.Lock, pool: IdlePool | None) -> None:
    conn, i, done = pool or Connection(host, port), start, 0
    local = Result(connections=0 if pool else 1)
    while time.perf_counter() < deadline and (max_calls is None or done < max_calls):
        verb, path, body = calls[i % len(calls)]
        t0 = time.perf_counter()
        try:
            status, _ = conn.request(path, body)
            ok = status == 200
        except OSError:
            if pool is None:
                conn.close()
            ok = False
        local.add(verb, time.perf_counter() - t0, ok)
        i, done = i + 1, done + 1
    if pool is None:
        conn.close()
    with lock:
        result.merge(local)


class Bursts:
    """Calls handed out in fan-outs of ``size`` (a task's predicates over ``size`` nodes): a
    caller that finds the fan-out done waits until every caller has, as Volcano's 16 predicate
    workers finish one task's nodes before it scores them and moves to the next task."""

    def __init__(self, calls: Sequence[Call], size: int, threads: int, deadline: float, max_calls: int | None):
        self.calls, self.size, self.deadline, self.max_calls = calls, size, deadline, max_calls
        self.lock = threading.Lock()
        self.barrier = threading.Barrier(threads, action=self._next)
        self.index, self.left, self.stop = 0, size, False

    def take(self) -> Call | None:
        """The next call of this fan-out, or None when it is done (then: ``barrier.wait()``)."""
        with self.lock:
            if self.left == 0:
                return None
            self.left -= 1
            self.index += 1
            return self.calls[(self.index - 1) % len(self.calls)]

    def _next(self) -> None:
        self.left = self.size
        self.stop = time.perf_counter() >= self.deadline or (self.max_calls is not None and self.index >= self.max_calls)


def _burst_loop(host: str, port: int, bursts: Bursts, result: Result, lock: threading.Lock, pool: IdlePool | None) -> None:
    conn = pool or Connection(host, port)
    local = Result(connections=0 if pool else 1)
    while True:
        call = bursts.take()
        if call is None:
            bursts.barrier.wait()
            if bursts.stop:
                break
            continue
        verb, path, body = call
        t0 = time.perf_counter()
        try:
            ok = conn.request(path, body)[0] == 200
        except OSError:
            if pool is None:
                conn.close()
            ok = False
        local.add(verb, time.perf_counter() - t0, ok)
    if pool is None:
        conn.close()
    with lock:
        result.merge(local)


def _threads(host: str, port: int, calls: Sequence[Call], threads: int, offset: int, seconds: float,
             max_calls: int | None, max_idle: int | None = None, burst: int | None = None) -> Result:
    result, lock = Result(), threading.Lock()
    pool = IdlePool(host, port, max_idle) if max_idle is not None else None
    cpu0, t0 = cpu_seconds(), time.perf_counter()
    deadline = t0 + seconds
    per_thread = None if max_calls is None else -(-max_calls // threads)
    if burst:
        bursts = Bursts(calls, burst, threads, deadline, max_calls)
        workers = [threading.Thread(target=_burst_loop, args=(host, port, bursts, result, lock, pool)) for _ in range(threads)]
    else:
        workers = [threading.Thread(target=_loop, args=(host, port, calls, (offset + k) * 7, deadline, per_thread, result, lock, pool))
                   for k in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    result.wall, result.client_cpu = time.perf_counter() - t0, cpu_seconds() - cpu0
    if pool is not None:
        pool.close()
        result.connections = pool.dials
    return result


_FORKED_CALLS: Sequence[Call] = ()


def _proc_main(args) -> Result:
    host, port, threads, offset, seconds, max_calls, max_idle = args
    return _threads(host, port, _FORKED_CALLS, threads, offset, seconds, max_calls, max_idle)


def drive(host: str, port: int, calls: Sequence[Call], *, concurrency: int = 16, seconds: float = 5.0,
          procs: int = 1, max_calls: int | None = None, max_idle: int | None = None, burst: int | None = None) -> Result:
    """Keeps ``concurrency`` callers busy with ``calls`` (round robin) for ``seconds``, each on its
    own keep-alive connection, or, with ``max_idle``, sharing connections of which at most
    ``max_idle`` stay idle (split over the ``procs`` client processes, at least 1 each). With
    ``burst`` the calls come in fan-outs of that many (``Bursts``), in one client process."""
    if procs <= 1 or burst:
        return _threads(host, port, calls, concurrency, 0, seconds, max_calls, max_idle, burst)
    global _FORKED_CALLS
    _FORKED_CALLS = calls                          # inherited by the forked clients: no copy over a pipe
    per = [concurrency // procs + (1 if k < concurrency % procs else 0) for k in range(procs)]
    offsets = [sum(per[:k]) for k in range(procs)]
    share = None if max_calls is None else -(-max_calls // procs)
    with multiprocessing.get_context("fork").Pool(procs) as pool:
        idle = [None if max_idle is None else max(1, max_idle // procs + (1 if k < max_idle % procs else 0)) for k in range(procs)]
        parts = pool.map(_proc_main, [(host, port, per[k], offsets[k], seconds, share, idle[k]) for k in range(procs)])
    total = Result()
    for part in parts:
        total.merge(part)
    return total


# --- a pool for step-by-step cycles ----------------------------------------------------------

class Pool:
    """``size`` keep-alive connections; ``map`` runs calls on them concurrently, in order of results."""

    def __init__(self, host: str, port: int, size: int = 16):
        self.host, self.port = host, port
        self.local = threading.local()
        self.executor = ThreadPoolExecutor(size)
        self.result = Result()
        self.lock = threading.Lock()

    def _conn(self) -> Connection:
        if not hasattr(self.local, "conn"):
            self.local.conn = Connection(self.host, self.port)
        return self.local.conn

    def call(self, verb: str, path: str, body: bytes | str) -> bytes:
        t0 = time.perf_counter()
        try:
            status, reply = self._conn().request(path, body)
        except OSError:
            self._conn().close()
            status, reply = 0, b""
        with self.lock:
            self.result.add(verb, time.perf_counter() - t0, status == 200)
        return reply

    def map(self, calls: Iterable[Call]) -> list[bytes]:
        return list(self.executor.map(lambda c: self.call(*c), calls))

    def close(self) -> None:
        self.executor.shutdown()
