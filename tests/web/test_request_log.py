"""The request log through the served app: a 200 gets its DEBUG line exactly while the request
log is at DEBUG, whenever its level changes (the dispatch reads logging's own level cache)."""

from __future__ import annotations

import logging

from tests.support.app import post

REQUEST_LOG = "policy_extender.request"


def request_lines(caplog) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == REQUEST_LOG]


def test_a_200_is_logged_while_the_request_log_is_at_debug_and_only_then(client, caplog):
    caplog.set_level(logging.INFO, REQUEST_LOG)
    assert post(client, "predicate").status_code == 200
    assert post(client, "predicate").status_code == 200  # logging has cached "not at DEBUG"
    assert request_lines(caplog) == []

    caplog.set_level(logging.DEBUG, REQUEST_LOG)
    assert post(client, "predicate").status_code == 200
    (line,) = request_lines(caplog)
    assert line.levelno == logging.DEBUG and line.verb == "predicate"

    caplog.set_level(logging.INFO, REQUEST_LOG)
    caplog.clear()
    assert post(client, "predicate").status_code == 200
    assert request_lines(caplog) == []
    caplog.set_level(logging.DEBUG, "policy_extender")  # a parent's level counts too
    logging.getLogger(REQUEST_LOG).setLevel(logging.NOTSET)
    assert post(client, "prioritize").status_code == 200
    assert [r.verb for r in request_lines(caplog)] == ["prioritize"]
