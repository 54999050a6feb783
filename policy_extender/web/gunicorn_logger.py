"""gunicorn's logger for the service: no access line per call unless ``accesslog`` is set.

gunicorn writes an access line for every request as soon as *any* logging configuration is
given (``logconfig_dict`` included), whatever ``accesslog`` says. The service configures logging
through ``logconfig_dict`` (so gunicorn's lines share its format) and sets ``accesslog`` to None
because it logs one line per verb call itself, at DEBUG: without this class every Volcano call
also wrote an INFO ``gunicorn.access`` line to stderr (about 30 us of CPU per call, measured).
"""

from __future__ import annotations

from gunicorn.glogging import Logger


class ServiceLogger(Logger):
    """gunicorn's Logger, with the access log only when ``accesslog`` names a destination."""

    def _compute_access_log_enabled(self) -> bool:  # gunicorn >= 24 caches this per setup()
        return bool(self.cfg.accesslog)

    def access(self, resp, req, environ, request_time) -> None:
        if self.cfg.accesslog:
            super().access(resp, req, environ, request_time)
