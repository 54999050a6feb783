"""``python -m bench.cpu.lsp_latency [--lines 500] [--edits 40]``: how long after an edit the editor
has the set's diagnostics (docs/editors.md; target: 100 ms for a 500-line set, after the first
check).

Method: a generated set of 5 policy files and a values file (``--lines`` lines in all: params,
lets, filters, scores with modifiers, an aggregate over each node's tasks), checked clean. Then
``--edits`` edits, each to one file in turn (a number changed; every third edit a misspelt field,
so diagnostics come and go), measured two ways:

* in process: ``Documents.update`` (the server's whole work for an edit: the set analysed again,
  the edited file parsed, the others' parses reused) — median, p90 and max;
* served: ``policy-extender lsp`` as a process over stdio, the time from writing the didChange
  to reading the publishDiagnostics of the edited file (the server publishes each file of the
  set) — median, p90 and max.

The first check (the set read and every file parsed) is reported apart: it is paid once, when the
first file of a set is opened.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RULES_PER_FILE_LINES = 10  # one block below is 10 lines


def block(file: int, index: int, value: int) -> str:
    return (f"let l{file}_{index} = node.idle.gpu * {value} + p{file}\n"
            f"filter f{file}-{index}: node.labels[\"zone\"] == task.annotations[\"zone\"] or l{file}_{index} > {value}\n"
            f"    reason \"zone {{node.labels['zone']}} is not {{task.annotations['zone']}} ({index})\"\n"
            f"    unresolvable\n"
            f"score s{file}-{index}: cluster.idle.gpu - count(t for t in node.tasks if t.status == \"Running\") + l{file}_{index}\n"
            f"    weight {1 + value % 3}\n"
            f"    normalize 0 to 10\n"
            f"score t{file}-{index}: if task.requests.gpu > {value} then free_gpu else 0\n"
            f"    when task.labels[\"tier\"] != \"batch\"\n"
            f"\n")


def policy_file(file: int, lines: int, value: int, typo: bool = False) -> str:
    head = f"# generated: file {file}\nparam p{file}: number = {file}\n\n"
    blocks = max(1, -(-(lines - 3) // RULES_PER_FILE_LINES))  # rounded up: at least ``lines``
    text = head + "".join(block(file, i, value + i) for i in range(blocks))
    return text.replace("node.labels[\"zone\"] ==", "node.lables[\"zone\"] ==", 1) if typo else text


def make_set(directory: Path, lines: int, files: int = 5) -> dict[Path, str]:
    texts = {directory / f"p{f}.policy": policy_file(f, lines // files, 1) for f in range(files)}
    for path, text in texts.items():
        path.write_text(text)
    (directory / "values.yaml").write_text("".join(f"p{f}.p{f}: {f + 1}\n" for f in range(files)))
    return texts


def edits(texts: dict[Path, str], lines: int, count: int) -> list[tuple[Path, str]]:
    paths = sorted(texts)
    return [(paths[i % len(paths)], policy_file(int(paths[i % len(paths)].stem[1:]), lines // len(paths),
                                                2 + i, typo=i % 3 == 2)) for i in range(count)]


def summary(samples: list[float]) -> str:
    ms = sorted(s * 1000 for s in samples)
    return (f"median {statistics.median(ms):.1f} ms, p90 {ms[int(len(ms) * 0.9) - 1]:.1f} ms, "
            f"max {ms[-1]:.1f} ms ({len(ms)} edits)")


def in_process(directory: Path, changes: list[tuple[Path, str]]) -> tuple[float, list[float]]:
    from policy_extender.lsp.documents import Documents
    documents = Documents()
    started = time.perf_counter()
    first = documents.refresh(directory)
    first_check = time.perf_counter() - started
    assert first.analysis.diagnostics == [], [d.render() for d in first.analysis.diagnostics][:3]  # clean: no warning either
    samples = []
    for path, text in changes:
        started = time.perf_counter()
        documents.update(path, text)
        samples.append(time.perf_counter() - started)
    return first_check, samples


class Wire:
    """JSON-RPC over a server's stdio, by hand: frames written, frames read until one is wanted."""

    def __init__(self) -> None:
        self.process = subprocess.Popen([sys.executable, "-m", "policy_extender", "lsp"],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self.next_id = 0

    def send(self, method: str, params: dict, request: bool = False) -> int | None:
        message: dict = {"jsonrpc": "2.0", "method": method, "params": params}
        if request:
            self.next_id += 1
            message["id"] = self.next_id
        body = json.dumps(message).encode()
        self.process.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)  # type: ignore[union-attr]
        self.process.stdin.flush()  # type: ignore[union-attr]
        return message.get("id")

    def read(self) -> dict:
        length = 0
        while True:
            line = self.process.stdout.readline()  # type: ignore[union-attr]
            if line in (b"\r\n", b""):
                break
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":")[1])
        return json.loads(self.process.stdout.read(length))  # type: ignore[union-attr]

    def until(self, wanted) -> dict:
        while True:
            message = self.read()
            if wanted(message):
                return message

    def close(self) -> None:
        self.send("shutdown", {}, request=True)
        self.send("exit", {})
        self.process.wait(timeout=30)


def served(texts: dict[Path, str], changes: list[tuple[Path, str]]) -> tuple[float, list[float]]:
    wire = Wire()
    first_id = wire.send("initialize", {"capabilities": {}, "rootUri": None}, request=True)
    wire.until(lambda m: m.get("id") == first_id)
    wire.send("initialized", {})
    started = time.perf_counter()
    for path, text in texts.items():
        wire.send("textDocument/didOpen", {"textDocument": {"uri": path.as_uri(), "languageId": "policy",
                                                              "version": 1, "text": text}})
    last = sorted(texts)[-1].as_uri()
    wire.until(lambda m: m.get("method") == "textDocument/publishDiagnostics" and m["params"]["uri"] == last)
    first_check = time.perf_counter() - started
    samples = []
    for version, (path, text) in enumerate(changes, start=2):
        uri = path.as_uri()
        started = time.perf_counter()
        wire.send("textDocument/didChange", {"textDocument": {"uri": uri, "version": version},
                                             "contentChanges": [{"text": text}]})
        wire.until(lambda m: m.get("method") == "textDocument/publishDiagnostics" and m["params"]["uri"] == uri)
        samples.append(time.perf_counter() - started)
    wire.close()
    return first_check, samples


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.cpu.lsp_latency", description=__doc__.split("\n")[0])
    parser.add_argument("--lines", type=int, default=500, help="lines in the generated set (default 500)")
    parser.add_argument("--edits", type=int, default=40, help="edits measured (default 40)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        texts = make_set(directory, args.lines)
        total = sum(t.count("\n") for t in texts.values()) + len(texts)
        changes = edits(texts, args.lines, args.edits)
        print(f"set: {len(texts)} policy files + values.yaml, {total} lines; {args.edits} edits, one file each")
        first, samples = in_process(directory, changes)
        print(f"in process: first check {first * 1000:.0f} ms; after an edit: {summary(samples)}")
        first, samples = served(texts, changes)
        print(f"served (stdio, edit → that file's diagnostics): first check {first * 1000:.0f} ms; "
              f"after an edit: {summary(samples)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
