"""A scheduler-like HTTP client: keep-alive HTTP/1.1 connections on raw sockets.

``Connection`` sends prebuilt request bytes and reads one response (Content-Length framing), the
way Go's ``net/http`` keeps a connection per concurrent call. ``drive`` keeps ``concurrency``
connections busy for a while over a list of calls, in ``procs`` forked client processes of
threads each, and returns per-verb latencies, error counts and the client's own CPU time (so a
report can show the client is not the bottleneck). ``Pool`` runs calls on a fixed set of
connections for the step-by-step scheduling cycle.
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


# --- results ---------------------------------------------------------------------------------

@dataclass
class Result:
    latencies: dict[str, list[float]] = field(default_factory=dict)
    errors: dict[str, int] = field(default_factory=dict)
    wall: float = 0.0
    client_cpu: float = 0.0

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
          result: Result, lock: threading.Lock, expect: dict[str, bytes] | None) -> None:
    conn, i, done = Connection(host, port), start, 0
    local = Result()
    while time.perf_counter() < deadline and (max_calls is None or done < max_calls):
        verb, path, body = calls[i % len(calls)]
        t0 = time.perf_counter()
        try:
            status, _ = conn.request(path, body)
            ok = status == 200
        except OSError:
            conn.close()
            ok = False
        local.add(verb, time.perf_counter() - t0, ok)
        i, done = i + 1, done + 1
    conn.close()
    with lock:
        result.merge(local)


def _threads(host: str, port: int, calls: Sequence[Call], threads: int, offset: int, seconds: float,
             max_calls: int | None) -> Result:
    result, lock = Result(), threading.Lock()
    cpu0, t0 = cpu_seconds(), time.perf_counter()
    deadline = t0 + seconds
    per_thread = None if max_calls is None else -(-max_calls // threads)
    workers = [threading.Thread(target=_loop, args=(host, port, calls, (offset + k) * 7, deadline, per_thread, result, lock, None))
               for k in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    result.wall, result.client_cpu = time.perf_counter() - t0, cpu_seconds() - cpu0
    return result


_FORKED_CALLS: Sequence[Call] = ()


def _proc_main(args) -> Result:
    host, port, threads, offset, seconds, max_calls = args
    return _threads(host, port, _FORKED_CALLS, threads, offset, seconds, max_calls)


def drive(host: str, port: int, calls: Sequence[Call], *, concurrency: int = 16, seconds: float = 5.0,
          procs: int = 1, max_calls: int | None = None) -> Result:
    """Keeps ``concurrency`` connections busy with ``calls`` (round robin) for ``seconds``."""
    if procs <= 1:
        return _threads(host, port, calls, concurrency, 0, seconds, max_calls)
    global _FORKED_CALLS
    _FORKED_CALLS = calls                          # inherited by the forked clients: no copy over a pipe
    per = [concurrency // procs + (1 if k < concurrency % procs else 0) for k in range(procs)]
    offsets = [sum(per[:k]) for k in range(procs)]
    share = None if max_calls is None else -(-max_calls // procs)
    with multiprocessing.get_context("fork").Pool(procs) as pool:
        parts = pool.map(_proc_main, [(host, port, per[k], offsets[k], seconds, share) for k in range(procs)])
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
