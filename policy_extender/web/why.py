"""``GET /why?task=NS/NAME`` (or ``job=NS/NAME``, ``queue=NAME``): what the decision tally holds
about one object, for the open cycle and the kept closed ones (decide/tallying.py), as JSON.

``policy-extender why`` renders it for people (commands/why.py). A blueprint of its own, registered
by ``create_app`` beside the ops blueprint.
"""

from __future__ import annotations

from flask import Blueprint, jsonify, request

from policy_extender.web.current import service

KINDS = ("task", "job", "queue")

why = Blueprint("why", __name__)


@why.get("/why")
def answer():
    """One object's tally: per cycle, newest first; 400 for a malformed query, 404 when the
    tally is off, 503 when the session store cannot be read."""
    given = [kind for kind in KINDS if kind in request.args]
    if len(given) != 1:
        return _error(400, "ask about exactly one object: /why?task=NAMESPACE/NAME, "
                      "/why?job=NAMESPACE/NAME or /why?queue=NAME")
    kind = given[0]
    name = request.args[kind].strip()
    if kind != "queue" and (name.count("/") != 1 or not all(name.split("/"))):
        return _error(400, f"{kind}={name!r}: expected NAMESPACE/NAME, e.g. {kind}=ml/train-7")
    if not name or len(name) > 512:
        return _error(400, f"{kind}: expected a name of 1 to 512 characters")
    svc = service()
    tally = svc.tally
    if not tally.enabled:
        return _error(404, "the decision tally is off (tally: false): set tally to true "
                      "(--tally true, POLICY_EXTENDER_TALLY=true) and restart the service")
    try:
        head = svc.sessions.head()
        answer = tally.why(kind, name, head)
    except Exception as exc:  # the store is down: say so, the verbs go on regardless
        return _error(503, f"the session store cannot be read ({type(exc).__name__}: {exc}); "
                      "the decision tally lives there: check the session store")
    answer["tally"] = {"cycles_kept": tally.keep_closed, "max_entries": tally.max_entries,
                       "flush_seconds": tally.flush_seconds}
    return jsonify(answer)


def _error(status: int, message: str):
    response = jsonify(error=message)
    response.status_code = status
    return response
