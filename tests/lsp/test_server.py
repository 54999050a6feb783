"""``policy-extender lsp`` as an editor meets it: a real LSP client (pytest-lsp) starts the
command over stdio and speaks the protocol to it; the policy files are real files on disk."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import pytest_lsp
from lsprotocol import types as lsp
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
SERVER = [sys.executable, "-m", "policy_extender", "lsp"]
ZONE = textwrap.dedent("""\
    param min_gpu: number = 1
    let gpus = node.idle.gpu

    filter same-zone: node.lables.zone == task.annotations.zone

    score packing: gpus * min_gpu
    """)


@pytest_lsp.fixture(config=ClientServerConfig(server_command=SERVER))
async def client(lsp_client: LanguageClient, tmp_path: Path):
    await lsp_client.initialize_session(lsp.InitializeParams(
        capabilities=client_capabilities("visual-studio-code"), root_uri=tmp_path.as_uri()))
    yield
    await lsp_client.shutdown_session()


async def open_file(client: LanguageClient, path: Path, text: str, language: str = "policy") -> str:
    path.write_text(text)
    uri = path.as_uri()
    client.text_document_did_open(lsp.DidOpenTextDocumentParams(
        lsp.TextDocumentItem(uri=uri, language_id=language, version=1, text=text)))
    await published(client, lambda: uri in client.diagnostics)
    return uri


async def published(client: LanguageClient, holds, timeout: float = 20) -> None:
    """Wait until ``holds()`` is true of the diagnostics published so far: a change publishes one
    notification per file of the set, in no promised order."""
    async def wait() -> None:
        while not holds():
            await client.wait_for_notification(lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    await asyncio.wait_for(wait(), timeout)


@pytest.mark.asyncio
async def test_a_policy_error_is_a_diagnostic_at_its_position_with_code_and_fix(client, tmp_path):
    (tmp_path / "values.yaml").write_text("zone.min_gpu: 2\n")
    uri = await open_file(client, tmp_path / "zone.policy", ZONE)
    [diagnostic] = client.diagnostics[uri]
    assert diagnostic.code == "E201" and diagnostic.severity == lsp.DiagnosticSeverity.Error
    assert diagnostic.range == lsp.Range(start=lsp.Position(line=3, character=23), end=lsp.Position(line=3, character=29))
    assert "did you mean 'labels'" in diagnostic.message

    actions = await client.text_document_code_action_async(lsp.CodeActionParams(
        text_document=lsp.TextDocumentIdentifier(uri=uri), range=diagnostic.range,
        context=lsp.CodeActionContext(diagnostics=[diagnostic])))
    [fix] = actions
    assert list(fix.edit.changes[uri]) == [lsp.TextEdit(range=diagnostic.range, new_text="labels")]

    fixed = ZONE.replace("lables", "labels")
    client.text_document_did_change(lsp.DidChangeTextDocumentParams(
        text_document=lsp.VersionedTextDocumentIdentifier(uri=uri, version=2), content_changes=[lsp.TextDocumentContentChangeWholeDocument(text=fixed)]))
    await published(client, lambda: list(client.diagnostics[uri]) == [])


@pytest.mark.asyncio
async def test_hover_completion_definition_references(client, tmp_path):
    (tmp_path / "values.yaml").write_text("zone.min_gpu: 2\n")
    uri = await open_file(client, tmp_path / "zone.policy", ZONE.replace("lables", "labels"))
    document = lsp.TextDocumentIdentifier(uri=uri)

    hover = await client.text_document_hover_async(lsp.HoverParams(text_document=document, position=lsp.Position(line=1, character=17)))
    assert "node.idle: resources" in hover.contents.value

    completion = await client.text_document_completion_async(lsp.CompletionParams(text_document=document, position=lsp.Position(line=3, character=23)))
    labels = {item.label for item in completion.items}
    assert {"labels", "idle", "allocatable"} <= labels and "evictee" not in labels

    definition = await client.text_document_definition_async(lsp.DefinitionParams(text_document=document, position=lsp.Position(line=5, character=24)))
    assert [(Path(d.uri).name if "://" not in d.uri else d.uri.rsplit("/", 1)[1], d.range.start.line)
            for d in definition] == [("zone.policy", 0), ("values.yaml", 0)]

    references = await client.text_document_references_async(lsp.ReferenceParams(
        text_document=document, position=lsp.Position(line=1, character=5),
        context=lsp.ReferenceContext(include_declaration=True)))
    assert [r.range.start.line for r in references] == [1, 5]


@pytest.mark.asyncio
async def test_formatting_is_fmt(client, tmp_path):
    uri = await open_file(client, tmp_path / "a.policy", "score   s:1+2\n")
    edits = await client.text_document_formatting_async(lsp.DocumentFormattingParams(
        text_document=lsp.TextDocumentIdentifier(uri=uri), options=lsp.FormattingOptions(tab_size=4, insert_spaces=True)))
    assert [e.new_text for e in edits] == ["score s: 1 + 2\n"]


@pytest.mark.asyncio
async def test_an_error_in_another_file_of_the_set_is_published_there(client, tmp_path):
    (tmp_path / "values.yaml").write_text("zone.min_gpus: 2\n")
    await open_file(client, tmp_path / "zone.policy", ZONE.replace("lables", "labels"))
    values = (tmp_path / "values.yaml").as_uri()
    await published(client, lambda: values in client.diagnostics)
    assert [d.code for d in client.diagnostics[values]] == ["E207"]


@pytest.mark.asyncio
async def test_a_fixture_file_shows_its_errors_and_runs_a_case(client, tmp_path):
    (tmp_path / "zone.policy").write_text(ZONE.replace("lables", "labels"))
    fixture = textwrap.dedent("""\
        policies: [zone.policy]
        defaults: {decision: filter}
        cases:
          - name: zone matches
            input:
              task: {name: t, annotations: {zone: a}}
              node: {name: n, labels: {zone: a}}
            expect: {fits: true}
          - name: zone differs
            input:
              task: {name: t, annotations: {zone: a}}
              node: {name: n, labels: {zone: b}}
            expect: {fits: true}
          - name: broken
            decision: filter
            inputt: {}
        """)
    uri = await open_file(client, tmp_path / "zone.fixtures.yaml", fixture, "yaml")
    [problem] = client.diagnostics[uri]
    assert problem.range.start.line == 15 and "inputt" in problem.message

    lenses = await client.text_document_code_lens_async(lsp.CodeLensParams(text_document=lsp.TextDocumentIdentifier(uri=uri)))
    assert [(lens.range.start.line, lens.command.arguments[1]) for lens in lenses] == \
        [(3, "zone matches"), (8, "zone differs"), (13, "broken")]
    passed = await client.workspace_execute_command_async(lsp.ExecuteCommandParams(
        command=lenses[0].command.command, arguments=lenses[0].command.arguments))
    failed = await client.workspace_execute_command_async(lsp.ExecuteCommandParams(
        command=lenses[1].command.command, arguments=lenses[1].command.arguments))
    assert [r["status"] for r in passed] == ["PASS"] and [r["status"] for r in failed] == ["FAIL"]
    assert any(m.type == lsp.MessageType.Error and "zone differs" in m.message for m in client.messages)


def frame(payload: bytes) -> bytes:
    return b"Content-Length: %d\r\n\r\n" % len(payload) + payload


def test_the_server_survives_malformed_messages(tmp_path):
    """Garbage JSON, a request for an unknown method, a hover on a file outside any set and a
    document that is not a policy are answered or ignored; the server then still answers."""
    messages = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"capabilities": {}}},
        {"jsonrpc": "2.0", "method": "initialized", "params": {}},
    ]
    raw = b"".join(frame(json.dumps(m).encode()) for m in messages)
    raw += frame(b"{not json")
    raw += frame(json.dumps({"jsonrpc": "2.0", "id": 2, "method": "no/such", "params": {}}).encode())
    raw += frame(json.dumps({"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {"textDocument": {
        "uri": (tmp_path / "notes.txt").as_uri(), "languageId": "text", "version": 1, "text": "\x00"}}}).encode())
    raw += frame(json.dumps({"jsonrpc": "2.0", "id": 3, "method": "textDocument/hover", "params": {
        "textDocument": {"uri": (tmp_path / "x" / "gone.policy").as_uri()},
        "position": {"line": 40, "character": 99}}}).encode())
    raw += frame(json.dumps({"jsonrpc": "2.0", "id": 4, "method": "shutdown"}).encode())
    raw += frame(json.dumps({"jsonrpc": "2.0", "method": "exit"}).encode())
    done = subprocess.run(SERVER, input=raw, capture_output=True, timeout=60, cwd=ROOT)
    answered = {m.get("id"): m for m in _messages(done.stdout)}
    assert "result" in answered[1] and answered[2]["error"]["code"] == -32601
    assert answered[3]["result"] is None and answered[4]["result"] is None


def _messages(data: bytes) -> list[dict]:
    found = []
    while data:
        head, _, rest = data.partition(b"\r\n\r\n")
        length = int(re.findall(rb"Content-Length: *(\d+)", head)[0])
        found.append(json.loads(rest[:length]))
        data = rest[length:]
    return found


def test_without_pygls_the_command_says_what_to_install(tmp_path):
    blocker = tmp_path / "pygls"
    blocker.mkdir()
    (blocker / "__init__.py").write_text("raise ImportError('pygls hidden by the test', name='pygls')\n")
    done = subprocess.run(SERVER, capture_output=True, text=True, timeout=60,
                          env={"PYTHONPATH": f"{tmp_path}:{ROOT}", "PATH": "/usr/bin:/bin"})
    assert done.returncode == 2
    assert done.stderr.strip() == ("policy-extender lsp: needs pygls (pygls is missing): "
                                   "pip install 'policy-extender[lsp]'")
