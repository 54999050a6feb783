"""Log lines: JSON lines that parse with the request id, readable text, gunicorn in the same format."""

from __future__ import annotations

import io
import json
import logging
import logging.config
import re

import flask
import pytest

from policy_extender import logs


@pytest.fixture
def captured():
    """Configure logging into a buffer; restore the root logger afterwards."""
    root = logging.getLogger()
    saved = (root.level, list(root.handlers))
    buffer = io.StringIO()

    def configure(level="debug", fmt="json"):
        logs.configure(level, fmt, stream=buffer)
        return buffer

    yield configure
    root.handlers[:] = saved[1]
    root.setLevel(saved[0])


def lines(buffer: io.StringIO) -> list[str]:
    return buffer.getvalue().splitlines()


def test_json_lines_parse_and_carry_the_bound_request_id(captured):
    buffer = captured(fmt="json")
    token = logs.bind_request_id("abc-123")
    try:
        logging.getLogger("policy_extender.web").info("loaded %d rules", 4, extra={"version": "v1"})
    finally:
        logs.unbind_request_id(token)
    logging.getLogger("x").warning("outside a request")

    first, second = (json.loads(line) for line in lines(buffer))
    assert first["msg"] == "loaded 4 rules"
    assert first["request_id"] == "abc-123"
    assert first["level"] == "INFO" and first["logger"] == "policy_extender.web"
    assert first["version"] == "v1"
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", first["ts"])
    assert second["request_id"] == logs.NO_REQUEST


def test_log_request_writes_one_debug_line_with_the_decision(captured):
    buffer = captured(fmt="json")
    logs.log_request("predicate", "default/train-0", "node-3", "reject", "zone-match", 0.0042, "rid-7")
    (entry,) = [json.loads(line) for line in lines(buffer)]
    assert entry["level"] == "DEBUG"
    assert entry == {**entry, "verb": "predicate", "task": "default/train-0", "node": "node-3",
                     "decision": "reject", "rule": "zone-match", "ms": 4.2, "request_id": "rid-7"}


def test_log_request_is_silent_above_debug(captured):
    buffer = captured(level="info", fmt="json")
    logs.log_request("predicate", "t", "n", "fits", None, 0.001, "rid")
    assert buffer.getvalue() == ""


def test_errors_are_logged_at_error_with_request_id_and_traceback(captured):
    buffer = captured(level="error", fmt="json")
    token = logs.bind_request_id("rid-err")
    try:
        raise ZeroDivisionError("boom")
    except ZeroDivisionError:
        logs.log_error("evaluation failed", verb="prioritize", exc_info=True)
    finally:
        logs.unbind_request_id(token)
    (entry,) = [json.loads(line) for line in lines(buffer)]
    assert entry["level"] == "ERROR" and entry["request_id"] == "rid-err"
    assert entry["verb"] == "prioritize"
    assert "ZeroDivisionError: boom" in entry["exc"]


def test_text_format_is_one_readable_line(captured):
    buffer = captured(fmt="text")
    logs.log_request("prioritize", "ns/t", "n1", "scored", "gpu free", 0.0015, "rid-1")
    (line,) = lines(buffer)
    assert re.fullmatch(
        r"\S+Z DEBUG policy_extender.request \[rid-1\] prioritize scored "
        r'verb=prioritize task=ns/t node=n1 decision=scored rule="gpu free" ms=1.5', line)


def test_unknown_format_says_how_to_fix():
    with pytest.raises(ValueError, match="POLICY_EXTENDER_LOG_FORMAT"):
        logs.configure("info", "yaml")


@pytest.mark.parametrize("sent, kept", [
    ("abc-123", True), ("a" * 128, True), ("a" * 129, False), ("has space", False),
    ("line\nbreak", False), ("", False), (None, False)])
def test_request_id_from_header_is_kept_only_when_sane(sent, kept):
    chosen = logs.request_id_from(sent)
    assert (chosen == sent) is kept
    assert re.fullmatch(r"[A-Za-z0-9._:/+=@-]{1,128}", chosen)


def test_flask_requests_get_an_id_echoed_and_logged(captured):
    buffer = captured(fmt="json")
    app = flask.Flask("t")
    app.wsgi_app = logs.RequestIdMiddleware(app.wsgi_app)

    @app.post("/predicate")
    def predicate():
        logging.getLogger("policy_extender.web").info("deciding")
        return {"status": "", "code": 0}

    client = app.test_client()
    sent = client.post("/predicate", headers={"X-Request-Id": "from-volcano"})
    generated = client.post("/predicate")

    assert sent.headers["X-Request-Id"] == "from-volcano"
    assert re.fullmatch(r"[0-9a-f]{32}", generated.headers["X-Request-Id"])
    ids = [json.loads(line)["request_id"] for line in lines(buffer)]
    assert ids == ["from-volcano", generated.headers["X-Request-Id"]]
    assert logs.current_request_id() == logs.NO_REQUEST


@pytest.mark.parametrize("fmt", ["json", "text"])
def test_gunicorn_logconfig_formats_gunicorn_loggers_like_ours(fmt, capsys):
    root = logging.getLogger()
    saved = {name: (logging.getLogger(name).handlers[:], logging.getLogger(name).propagate)
             for name in ("", "gunicorn.error", "gunicorn.access")}
    try:
        logging.config.dictConfig(logs.gunicorn_logconfig("info", fmt))
        logging.getLogger("gunicorn.error").info("Booting worker with pid: %s", 42)
        logging.getLogger("policy_extender.web").info("ready")
    finally:
        for name, (handlers, propagate) in saved.items():
            logging.getLogger(name).handlers[:] = handlers
            logging.getLogger(name).propagate = propagate
        root.setLevel(logging.WARNING)
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2
    if fmt == "json":
        assert [json.loads(line)["logger"] for line in err] == ["gunicorn.error", "policy_extender.web"]
        assert json.loads(err[0])["msg"] == "Booting worker with pid: 42"
    else:
        assert err[0].split()[1:4] == ["INFO", "gunicorn.error", "[-]"]


def test_the_service_echoes_and_logs_a_request_id_on_verb_and_ops_routes(captured, tmp_path):
    """Verb calls (``VerbDispatch``) and the ops routes (Flask) of the service as built: both
    echo the caller's sane id or a new one, log with it, and leave no id bound afterwards."""
    from pathlib import Path

    from policy_extender.config import Config
    from policy_extender.web import create_app
    buffer = captured(fmt="json")
    root = Path(__file__).resolve().parents[2]
    app = create_app(Config(policy_dirs=(str(root / "bench" / "policies"),), reload_interval=0.0,
                            session_store=f"sqlite:{tmp_path / 's.sqlite3'}"))
    client = app.test_client()
    sent = client.post("/predicate", data=b"{not json", content_type="application/json",
                       headers={"X-Request-Id": "from-volcano"})
    generated = [client.post("/predicate", data=b"{not json", content_type="application/json")
                 for _ in range(3)]
    ops = client.get("/status", headers={"X-Request-Id": "from-ops"})
    assert sent.status_code == 400 and sent.headers["X-Request-Id"] == "from-volcano"
    new = [response.headers["X-Request-Id"] for response in generated]
    assert len(set(new)) == 3 and all(re.fullmatch(r"[0-9a-f]{32}", rid) for rid in new), new
    assert ops.status_code == 200 and ops.headers["X-Request-Id"] == "from-ops"
    logged = [json.loads(line) for line in lines(buffer)]
    refused = [entry["request_id"] for entry in logged if entry["msg"].startswith("predicate 400")]
    assert refused == ["from-volcano", *new], logged  # the 400s' WARNING lines carry the ids
    app.extensions["policy_extender"].stop()
    assert logs.current_request_id() == logs.NO_REQUEST


def test_a_request_id_is_bound_per_thread_and_put_back():
    """gthread serves requests on several threads at once: each line carries its own thread's
    request, a thread started meanwhile starts with none, and unbinding restores the previous."""
    import threading

    outer = logs.bind_request_id("rid-main")
    seen = {}

    def other():
        seen["at start"] = logs.current_request_id()
        token = logs.bind_request_id("rid-other")
        seen["bound"] = logs.current_request_id()
        logs.unbind_request_id(token)
        seen["after"] = logs.current_request_id()
    try:
        inner = logs.bind_request_id("rid-nested")
        thread = threading.Thread(target=other)
        thread.start()
        thread.join()
        assert logs.current_request_id() == "rid-nested"
        logs.unbind_request_id(inner)
        assert logs.current_request_id() == "rid-main"
    finally:
        logs.unbind_request_id(outer)
    assert seen == {"at start": logs.NO_REQUEST, "bound": "rid-other", "after": logs.NO_REQUEST}
    assert logs.current_request_id() == logs.NO_REQUEST
