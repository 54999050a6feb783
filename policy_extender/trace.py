"""Per-request timings for benchmarks: where a verb call's time goes. Off unless asked.

``POLICY_EXTENDER_TRACE=FILE`` in a worker's environment makes it append one JSON line per verb
call to ``FILE``::

    {"kind": "request", "pid": 123, "thread": 456, "verb": "onSessionOpen", "start": t,
     "phases": [["received", t], ["decoded", t], ["encoded", t], ["stored", t], ["replied", t]],
     "values": {"decode_while_receiving": s, "pieces": n}, "end": t}

(the values of a body decoded while it arrived: onSessionOpen, and prioritize from 24 MiB; a
predicate has ``"node_reused": 1`` when its node was not decoded again, ``wire.node_reuse``)

and one line per garbage collection (``{"kind": "gc", "generation": 2, "start": t, "end": t,
"collected": n}``) and per metrics flush (``{"kind": "flush", ...}``). Times are
``time.perf_counter()`` (``CLOCK_MONOTONIC``, the same clock in every process of the host,
so a client can line its own send and receive times up with them). ``start`` is when the verb
dispatch got the request (headers parsed), ``end`` when its answer was built (gunicorn then
writes it). Lines are buffered per process and written by the metrics flusher thread every
``metrics.FLUSH_SECONDS`` and at exit.

Off (the default), ``mark`` and ``note`` are calls that return at once and the dispatch checks one
attribute per call; nothing is timed, collected or written. ``bench.served.open_breakdown`` and
``bench.served.tail`` turn it on in the servers they start.
"""

from __future__ import annotations

import atexit
import gc
import os
import threading
import time
from typing import Any

import orjson

from policy_extender import process

ENV = "POLICY_EXTENDER_TRACE"

_local = threading.local()


class Tracer:
    """This process's trace buffer over ``path`` (one per process: see ``from_env``)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.pid = process.pid
        self.lock = threading.Lock()
        self.lines: list[bytes] = []
        self._gc_started = 0.0

    def begin(self) -> list:
        """Start timing this thread's request: ``mark`` adds to the list returned."""
        marks: list = []
        _local.marks, _local.values = marks, {}
        return marks

    def end(self, verb: str, started: float, marks: list) -> None:
        values, _local.marks, _local.values = getattr(_local, "values", None) or {}, None, None
        line = orjson.dumps({"kind": "request", "pid": self.pid, "thread": threading.get_ident(),
                             "verb": verb, "start": started, "phases": marks, "values": values,
                             "end": time.perf_counter()})
        with self.lock:
            self.lines.append(line)

    def event(self, kind: str, start: float, end: float, **fields: Any) -> None:
        line = orjson.dumps({"kind": kind, "pid": self.pid, "start": start, "end": end, **fields})
        with self.lock:
            self.lines.append(line)

    def gc_callback(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._gc_started = time.perf_counter()
        else:
            self.event("gc", self._gc_started, time.perf_counter(),
                       generation=info.get("generation"), collected=info.get("collected"))

    def flush(self) -> None:
        with self.lock:
            lines, self.lines = self.lines, []
        if lines:
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                os.write(fd, b"\n".join(lines) + b"\n")
            finally:
                os.close(fd)


_tracer: Tracer | None = None
_tracer_lock = threading.Lock()


def from_env() -> Tracer | None:
    """This process's tracer when ``POLICY_EXTENDER_TRACE`` is set, else None (and no cost)."""
    global _tracer
    path = os.environ.get(ENV)
    if not path:
        return None
    with _tracer_lock:
        if _tracer is None or _tracer.pid != process.pid:
            _tracer = Tracer(path)
            gc.callbacks.append(_tracer.gc_callback)
            atexit.register(_tracer.flush)
            from policy_extender import metrics
            metrics.on_flush(_flush)
            metrics.flush = _timed(metrics.flush, _tracer)  # the flusher thread's turns, timed
            global mark, note
            mark, note = _mark, _note
        return _tracer


def _timed(flush_metrics, tracer: Tracer):
    def timed() -> None:
        started = time.perf_counter()
        try:
            flush_metrics()
        finally:
            tracer.event("flush", started, time.perf_counter())
    return timed


def _flush() -> None:
    if _tracer is not None and _tracer.pid == process.pid:
        _tracer.flush()


def flush() -> None:
    """Write this process's buffered lines now (the metrics flusher does it every turn)."""
    _flush()


def _mark(name: str) -> None:
    marks = getattr(_local, "marks", None)
    if marks is not None:
        marks.append((name, time.perf_counter()))


def _note(name: str, value: float) -> None:
    values = getattr(_local, "values", None)
    if values is not None:
        values[name] = value


def _off(name: str, value: float = 0.0) -> None:
    """``mark`` and ``note`` while tracing is off: nothing."""


#: ``mark`` and ``note`` while tracing is off (``trace.mark is not trace.OFF`` skips the call)
OFF = _off


#: ``trace.mark("decoded")``: the time this request's phase ended (module attribute: look it
#: up at call time, it is replaced when tracing starts)
mark = _off
#: ``trace.note("decode_while_receiving", seconds)``: a figure of this request
note = _off
