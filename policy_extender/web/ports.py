"""The two ports of ``serve`` when ``ops_bind`` is set: the verbs on ``bind`` alone, everything else
(``/healthz``, ``/readyz``, ``/status``, ``/metrics``, ``/why``) on ``ops_bind`` alone.

gunicorn listens on both addresses; which one a request came in on is the local address of its
connection (``getsockname`` of ``gunicorn.socket``: the kernel's, not the client's ``Host``
header). A verb path on the ops port, or any other path on the verb port, is answered 404 without
being looked at further, so whoever may reach only the ops port (Prometheus, a person with
``kubectl port-forward``) cannot call a verb, and the scheduler's port reveals nothing but the
verbs' answers. Outside gunicorn (Flask's test client) there is one app and no port to tell.
"""

from __future__ import annotations

import json
from typing import Any, Callable, Iterable

WsgiApp = Callable[[dict, Callable], Iterable[bytes]]


def listener_key(bind: str) -> Any:
    """What ``getsockname`` of a connection accepted on ``bind`` is compared by: the port for
    HOST:PORT (any host: ``0.0.0.0`` accepts on every address), the path for unix:PATH."""
    if bind.startswith("unix:"):
        return bind[len("unix:"):]
    return int(bind.rsplit(":", 1)[1])


class PortSplit:
    """WSGI middleware: ``app`` answers a request only on the port its path belongs to."""

    def __init__(self, app: WsgiApp, verb_paths: Iterable[str], bind: str, ops_bind: str) -> None:
        self.app = app
        self.verb_paths = frozenset(verb_paths)
        self.bind, self.ops_bind = bind, ops_bind
        self.ops_key = listener_key(ops_bind)

    def __call__(self, environ: dict, start_response: Callable) -> Iterable[bytes]:
        on_ops = self.on_ops_port(environ)
        if on_ops is None:
            return self.app(environ, start_response)
        path = environ.get("PATH_INFO", "")
        is_verb = path in self.verb_paths
        if is_verb and on_ops:
            return _not_here(start_response, f"{path} is a verb: the verbs are served on the scheduler's port "
                             f"(bind), not on this one (ops_bind {self.ops_bind})")
        if not is_verb and not on_ops:
            return _not_here(start_response, f"{path} is not a verb: this port (bind) serves the scheduler's "
                             "verbs alone; /healthz, /readyz, /status, /metrics and /why are on the ops "
                             "port (ops_bind)")
        return self.app(environ, start_response)

    def on_ops_port(self, environ: dict) -> bool | None:
        """Whether the request came in on the ops listener; None outside gunicorn."""
        sock = environ.get("gunicorn.socket")
        if sock is None:
            return None
        try:
            name = sock.getsockname()
        except OSError:  # the client is gone: answer as the verb port would, nothing revealed
            return False
        key = name if isinstance(name, str) else name[1]
        return key == self.ops_key


def _not_here(start_response: Callable, message: str) -> list[bytes]:
    body = json.dumps({"error": f"404 Not Found: {message}"}).encode()
    start_response("404 NOT FOUND", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
    return [body]
