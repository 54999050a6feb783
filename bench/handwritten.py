"""What a user would write without the policy engine: a Flask extender with the benchmark
policy's three rules in Python, decoding with the service's own pruned msgspec decoders (the
same read set the policy compiles to), so the difference to the service is the engine alone.

Rules (the same as ``bench/policies/gpu.policy``):

* zone affinity: a task annotated ``scheduling.example.com/zone`` fits only nodes whose
  ``topology.kubernetes.io/zone`` label has that value (code 3: preemption cannot help);
* GPU fit: the node's idle GPUs must cover the task's GPU request (code 2);
* GPU bin-packing: score ``10 * (GPUs in use on the node + GPUs the task asks)`` so fuller nodes win.

``app`` is the Flask app (what a user writes); ``wsgi_app`` answers the same verbs from a plain
dict of paths, as the service's own ``VerbDispatch`` does, and reads the body as the service does
(``policy_extender.web.http.read_body``: straight from gunicorn's socket), to compare engine
against hand code with the same HTTP layer, the same body reading and the same decoding.
"""

from __future__ import annotations

import orjson
from flask import Flask, request

from bench.bare_wsgi import NEUTRAL_ANSWERS, read_body
from policy_extender.wire.paths import ALWAYS_READ
from policy_extender.web.http import read_body as read_like_the_service
from policy_extender.wire import decode as wire

ZONE_ANNOTATION = "scheduling.example.com/zone"
ZONE_LABEL = "topology.kubernetes.io/zone"
#: the wire paths the three rules read, plus what every decoder keeps: the read set the policy compiles to
READS = {
    "task": frozenset({("Pod", "metadata", "annotations"), ("Resreq",), *ALWAYS_READ["task"]}),
    "node": frozenset({("Node", "metadata", "labels"), ("Idle",), ("Allocatable",), *ALWAYS_READ["node"]}),
}


def filter_node(task, node) -> tuple[str, int]:
    """(reason, code): an empty reason means the task fits."""
    zone = task.annotations.get(ZONE_ANNOTATION)
    if zone is not None and node.labels.get(ZONE_LABEL) != zone:
        return f"zone: node is in {node.labels.get(ZONE_LABEL)}, task wants {zone}", 3
    if node.idle.gpu < task.requests.gpu:
        return f"gpu: {node.idle.gpu} idle, task needs {task.requests.gpu}", 2
    return "", 0


def score_node(task, node) -> float:
    return 10 * (node.allocatable.gpu - node.idle.gpu + task.requests.gpu)


def predicate(body: bytes) -> bytes:
    req = wire.decode_predicate(body, READS)
    reason, code = filter_node(req.task, req.node)
    return orjson.dumps({"status": reason, "code": code})


def prioritize(body: bytes) -> bytes:
    req = wire.decode_prioritize(body, READS)
    return orjson.dumps({"nodeScore": {n.name: score_node(req.task, n) for n in req.nodes}, "errorMessage": ""})


HANDLERS = {"predicate": predicate, "prioritize": prioritize}
#: the service's limits as the benchmark runs it (bench.server.SERVICE_BODY_LIMITS)
BODY_LIMIT = 512 << 20


def answer(verb: str, body: bytes) -> bytes:
    handler = HANDLERS.get(verb)
    return handler(body) if handler else NEUTRAL_ANSWERS[verb]


def create_app() -> Flask:
    flask_app = Flask("handwritten-extender")

    @flask_app.post("/<verb>")
    def verb_call(verb: str):
        if verb not in NEUTRAL_ANSWERS:
            return {"error": f"unknown verb {verb}"}, 404
        return flask_app.response_class(answer(verb, request.get_data()), mimetype="application/json")

    return flask_app


app = create_app()


def wsgi_app(environ: dict, start_response):
    verb = environ.get("PATH_INFO", "").lstrip("/")
    if verb not in NEUTRAL_ANSWERS:
        read_body(environ)
        start_response("404 Not Found", [("Content-Type", "text/plain"), ("Content-Length", "9")])
        return [b"not found"]
    body = read_like_the_service(environ, BODY_LIMIT)
    reply = answer(verb, body)
    start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(reply)))])
    return [reply]
