"""The worker's :class:`~policy_extender.service.Service`, as ``create_app`` keeps it in the Flask
app: what a route of the ops and ``/why`` blueprints reads through :func:`service`."""

from __future__ import annotations

from flask import Flask, current_app

from policy_extender.service import Service

#: The key of ``app.extensions`` that holds the Service.
EXTENSION = "policy_extender"


def keep(app: Flask, svc: Service) -> None:
    """Make ``svc`` the service of ``app``'s routes."""
    app.extensions[EXTENSION] = svc


def service() -> Service:
    """The service of the app handling the current request."""
    return current_app.extensions[EXTENSION]
