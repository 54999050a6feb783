"""The two errors of the wire layer: a request body Volcano sent that we cannot read, and a compact
test input that cannot be expanded into a wire body."""

from __future__ import annotations


class WireError(ValueError):
    """A request body that is not JSON or has a wrong type in a field the policies read.

    ``path`` is a JSONPath-like location in the body (``$.task.Resreq.MilliCPU``); the web layer
    answers HTTP 400 with ``str(error)``.
    """

    def __init__(self, message: str, path: str = "$"):
        super().__init__(f"{path}: {message}")
        self.message = message
        self.path = path


class CompactError(ValueError):
    """A compact fixture value (test input) that cannot be expanded into a wire body.

    ``path`` is where in the compact input (``node.tasks[1].requests.gpu``); the fixture runner
    adds the file and line.
    """

    def __init__(self, path: str, message: str):
        super().__init__(f"{path}: {message}" if path else message)
        self.path = path
        self.message = message
