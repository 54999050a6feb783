"""gunicorn settings for ``policy-extender serve`` (built from a :class:`config.Config`).

Worker class: **gthread**. Volcano's Go client (``net/http`` with the default transport) keeps
connections alive between calls and sends one task's predicate calls on up to 16 connections
at once. ``sync`` workers answer ``Connection: close`` to every request, so each call pays a new
TCP connection (and the Go client's pool churns); gthread workers keep the connections and park
idle ones in a poller, costing no thread.

Measured with ``python -m bench.served.loadcheck`` (16 keep-alive Python clients on the same
2-core machine, the 25 KB sample predicate body, 2 workers, sample policies): sync 657 req/s,
gthread x4 460-1031 req/s, gthread x8 663 req/s (the machine was shared, so runs vary by 2x).
Throughput is the same within noise, because the GIL lets one thread of a worker run at a time
and the in-process cost of a predicate is ~340 us (half of it msgspec scanning the body); what
differs is the connection: sync makes the Go client open a new TCP connection per call. So
gthread, with 4 threads per worker (they only need to cover the concurrent connections).
The worker is gthread's with one change (``web/worker.py``): a connection gets a thread only once
its request has arrived whole (or, for a body over 1 MiB, its first 64 KiB), so clients that send slowly
hold no thread.

``keepalive`` is longer than Go's idle-connection timeout (90 s): the client then always closes
an idle connection first, so a request is never sent on a connection the server is closing.
``timeout`` covers decoding a large onSessionOpen snapshot (hundreds of MB).
"""

from __future__ import annotations

import faulthandler
from typing import Any

from policy_extender import heap, logs, metrics
from policy_extender.config import Config
from policy_extender.policyset.reload import install_sighup

#: gthread, with each request received on the worker's event loop before a thread takes it
#: (``web/worker.py``: clients that send slowly hold no thread)
WORKER_CLASS = "policy_extender.web.worker.WholeRequestWorker"
#: seconds: > Go's http.Transport IdleConnTimeout (90 s)
KEEPALIVE = 120
#: seconds a worker may spend on one request before the master restarts it
TIMEOUT = 120
GRACEFUL_TIMEOUT = 20
#: pending connections in the listen queue (Volcano bursts 16 parallel calls per task)
BACKLOG = 2048
#: gunicorn's logger without the per-request access line its logconfig_dict would switch on
LOGGER_CLASS = "policy_extender.web.gunicorn_logger.ServiceLogger"


def settings(config: Config) -> dict[str, Any]:
    """gunicorn's settings (``cfg.set`` names) for ``config``."""
    return {
        "bind": [config.bind, *([config.ops_bind] if config.ops_bind else [])],  # web/ports.py splits them
        "workers": config.workers,
        "threads": config.threads,
        "worker_class": WORKER_CLASS,
        "keepalive": KEEPALIVE,
        "timeout": TIMEOUT,
        "graceful_timeout": GRACEFUL_TIMEOUT,
        "backlog": BACKLOG,
        "loglevel": config.log_level,
        "accesslog": None,  # one line per verb call comes from the app, at debug level
        "logger_class": LOGGER_CLASS,  # ... and none from gunicorn: see web/gunicorn_logger.py
        "errorlog": "-",
        "logconfig_dict": _logconfig(config),
        "preload_app": False,  # each worker builds its app after fork: own store connections, own reloader
        "on_starting": on_starting,
        "on_exit": on_exit,
        "child_exit": child_exit,
        "worker_exit": worker_exit,
        "post_worker_init": post_worker_init,
        # gunicorn >= 25.1 opens a control socket at one fixed path per user: several services
        # (or test servers) on one host would take it from each other; nothing here uses it.
        "control_socket_disable": True,
        **_tls(config),
    }


def _tls(config: Config) -> dict[str, Any]:
    """HTTPS when a certificate is configured (Config checks that the key comes with it)."""
    if not config.certfile:
        return {}
    return {"certfile": config.certfile, "keyfile": config.keyfile}


def _logconfig(config: Config) -> dict[str, Any]:
    """gunicorn's own lines in the service's format (text or JSON lines)."""
    return logs.gunicorn_logconfig(config.log_level, config.log_format)


def on_starting(server: Any) -> None:
    """Master, before any worker forks: the metrics' multiprocess directory; large buffers out of
    the C heap and malloc arenas capped (``heap.py``; the workers inherit the settings)."""
    heap.bound_large_allocations()
    heap.bound_arenas()
    metrics.on_starting(server)


def on_exit(server: Any) -> None:
    """Master, on its way out (SIGTERM, SIGINT, a halt): remove the instance's runtime directory
    (the default session store, the metrics directory, the last good policy set)."""
    instance = getattr(getattr(server, "app", None), "instance", None)
    if instance is not None:
        instance.close()


def worker_exit(server: Any, worker: Any) -> None:
    """Worker, on its way out: the metrics it has not written yet."""
    metrics.worker_exit(server, worker)


def child_exit(server: Any, worker: Any) -> None:
    metrics.child_exit(server, worker)


def post_worker_init(worker: Any) -> None:
    """Worker, after gunicorn reset its signal handlers: SIGHUP to a worker reloads its policies;
    a fatal signal (SIGSEGV, SIGBUS ...) prints every thread's Python stack to the log first;
    large buffers stay out of the C heap (``heap.py``: set in the master already, again here for
    a worker of a master that did not run ``on_starting``), and so do its malloc arenas."""
    heap.bound_large_allocations()
    heap.bound_arenas()
    faulthandler.enable(all_threads=True)
    service = getattr(worker.wsgi, "extensions", {}).get("policy_extender")
    if service is not None:
        install_sighup(service.reloader)
