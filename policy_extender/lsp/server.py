"""The language server over stdio (pygls): each protocol message turned into a call of
``features`` / ``fixtures`` on the document's set (``documents``), and back.

Diagnostics are published for every file of the changed document's set (a values file's error,
or a shared let's, shows in the file it is in), and cleared in the files that have none now."""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

from lsprotocol import types as lsp
from pygls.lsp.server import LanguageServer
from pygls.uris import from_fs_path, to_fs_path

from policy_extender import __version__
from policy_extender.errors import Diagnostic
from policy_extender.lsp import features, fixtures
from policy_extender.lsp.documents import Documents, SetView, in_set
from policy_extender.lsp.locate import line_of, to_line_column, to_range, utf16_column

RUN_CASE = "policy-extender.runCase"
_KINDS = {"field": lsp.CompletionItemKind.Field, "root": lsp.CompletionItemKind.Variable,
          "shorthand": lsp.CompletionItemKind.Constant, "let": lsp.CompletionItemKind.Variable,
          "shared let": lsp.CompletionItemKind.Variable, "param": lsp.CompletionItemKind.Constant,
          "builtin": lsp.CompletionItemKind.Function, "keyword": lsp.CompletionItemKind.Keyword}


class PolicyServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__("policy-extender", __version__)
        self.documents = Documents()
        self.published: dict[Path, set[str]] = {}  # directory -> the URIs given diagnostics last time


def path_of(uri: str) -> Path:
    return Path(to_fs_path(uri) or uri)


def uri_of(path: Path) -> str:
    return from_fs_path(str(path)) or str(path)


def publish(server: PolicyServer, view: SetView) -> None:
    """Every diagnostic of the set, in the file it points at; the files with none cleared."""
    by_uri: dict[str, list[lsp.Diagnostic]] = {uri_of(view.path_of(name)): [] for name in view.sources}
    for diagnostic in view.analysis.diagnostics:
        uri = uri_of(view.path_of(diagnostic.span.file))
        by_uri.setdefault(uri, []).append(to_lsp(diagnostic, view))
    for uri in server.published.get(view.directory, set()) - set(by_uri):
        by_uri[uri] = []
    server.published[view.directory] = {uri for uri, found in by_uri.items() if found}
    for uri, found in by_uri.items():
        server.text_document_publish_diagnostics(lsp.PublishDiagnosticsParams(uri=uri, diagnostics=found))


def to_lsp(diagnostic: Diagnostic, view: SetView) -> lsp.Diagnostic:
    source = view.sources.get(diagnostic.span.file, "")
    message = diagnostic.message + (f"\nhint: {diagnostic.hint}" if diagnostic.hint else "")
    related = [lsp.DiagnosticRelatedInformation(
        lsp.Location(uri_of(view.path_of(span.file)), to_range(span, view.sources.get(span.file, ""))), note)
        for span, note in features.related(diagnostic)]
    severity = lsp.DiagnosticSeverity.Warning if diagnostic.severity == "warning" else lsp.DiagnosticSeverity.Error
    return lsp.Diagnostic(range=to_range(diagnostic.span, source), message=message, severity=severity,
                          code=diagnostic.code, source="policy-extender", related_information=related or None,
                          data={"hint": diagnostic.hint})


def build() -> PolicyServer:
    server = PolicyServer()

    @server.feature(lsp.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: PolicyServer, params: lsp.DidOpenTextDocumentParams) -> None:
        changed(ls, params.text_document.uri, params.text_document.text)

    @server.feature(lsp.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: PolicyServer, params: lsp.DidChangeTextDocumentParams) -> None:
        uri = params.text_document.uri
        changed(ls, uri, ls.workspace.get_text_document(uri).source)

    @server.feature(lsp.TEXT_DOCUMENT_DID_SAVE)
    def did_save(ls: PolicyServer, params: lsp.DidSaveTextDocumentParams) -> None:
        path = path_of(params.text_document.uri)
        if fixtures.is_fixture_file(path):
            publish_fixture(ls, path)
        elif in_set(path):
            publish(ls, ls.documents.reread(path.parent))

    @server.feature(lsp.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: PolicyServer, params: lsp.DidCloseTextDocumentParams) -> None:
        path = path_of(params.text_document.uri)
        if in_set(path):
            publish(ls, ls.documents.close(path))

    @server.feature(lsp.WORKSPACE_DID_CHANGE_WATCHED_FILES)
    def watched(ls: PolicyServer, params: lsp.DidChangeWatchedFilesParams) -> None:
        for directory in {path_of(change.uri).parent for change in params.changes}:
            publish(ls, ls.documents.reread(directory))

    @server.feature(lsp.TEXT_DOCUMENT_HOVER)
    def hover(ls: PolicyServer, params: lsp.HoverParams) -> lsp.Hover | None:
        view, name, line, column = at(ls, params.text_document.uri, params.position)
        text = features.hover(view, name, line, column) if view else None
        return lsp.Hover(contents=lsp.MarkupContent(kind=lsp.MarkupKind.Markdown, value=text)) if text else None

    @server.feature(lsp.TEXT_DOCUMENT_COMPLETION, lsp.CompletionOptions(trigger_characters=["."]))
    def completion(ls: PolicyServer, params: lsp.CompletionParams) -> lsp.CompletionList:
        view, name, line, column = at(ls, params.text_document.uri, params.position)
        items = features.completions(view, name, view.sources.get(name, ""), line, column) if view else []
        return lsp.CompletionList(is_incomplete=False, items=[
            lsp.CompletionItem(i.label, kind=_KINDS.get(i.kind), detail=i.detail,
                               documentation=i.doc or None) for i in items])

    @server.feature(lsp.TEXT_DOCUMENT_DEFINITION)
    def definition(ls: PolicyServer, params: lsp.DefinitionParams) -> list[lsp.Location]:
        view, name, line, column = at(ls, params.text_document.uri, params.position)
        return locations(view, features.definition(view, name, line, column)) if view else []

    @server.feature(lsp.TEXT_DOCUMENT_REFERENCES)
    def references(ls: PolicyServer, params: lsp.ReferenceParams) -> list[lsp.Location]:
        view, name, line, column = at(ls, params.text_document.uri, params.position)
        if view is None:
            return []
        spans = features.references(view, name, line, column, params.context.include_declaration)
        return locations(view, spans)

    @server.feature(lsp.TEXT_DOCUMENT_FORMATTING)
    def formatting(ls: PolicyServer, params: lsp.DocumentFormattingParams) -> list[lsp.TextEdit]:
        path = path_of(params.text_document.uri)
        text = ls.workspace.get_text_document(params.text_document.uri).source
        new = features.formatted(path.name, text)
        if new is None or new == text:
            return []
        lines = text.split("\n")
        end = lsp.Position(len(lines) - 1, utf16_column(lines[-1], len(lines[-1])))
        return [lsp.TextEdit(lsp.Range(lsp.Position(0, 0), end), new)]

    @server.feature(lsp.TEXT_DOCUMENT_CODE_ACTION,
                    lsp.CodeActionOptions(code_action_kinds=[lsp.CodeActionKind.QuickFix]))
    def code_action(ls: PolicyServer, params: lsp.CodeActionParams) -> list[lsp.CodeAction]:
        view, name, _, _ = at(ls, params.text_document.uri, params.range.start)
        if view is None:
            return []
        source = view.sources.get(name, "")
        wanted = {(d.range.start.line, d.range.start.character, d.code) for d in params.context.diagnostics}
        actions = []
        for diagnostic in view.analysis.diagnostics:
            where = to_range(diagnostic.span, source)
            fix = features.quick_fix(diagnostic, source) if diagnostic.span.file == name else None
            if fix is None or (where.start.line, where.start.character, diagnostic.code) not in wanted:
                continue
            edit = lsp.WorkspaceEdit(changes={params.text_document.uri: [lsp.TextEdit(where, fix.text)]})
            actions.append(lsp.CodeAction(title=fix.title, kind=lsp.CodeActionKind.QuickFix, edit=edit,
                                          diagnostics=[to_lsp(diagnostic, view)], is_preferred=True))
        return actions

    @server.feature(lsp.TEXT_DOCUMENT_CODE_LENS)
    def code_lens(ls: PolicyServer, params: lsp.CodeLensParams) -> list[lsp.CodeLens]:
        path = path_of(params.text_document.uri)
        if not fixtures.is_fixture_file(path):
            return []
        _, lenses = fixtures.read(path)
        return [lsp.CodeLens(lsp.Range(lsp.Position(lens.line - 1, 0), lsp.Position(lens.line - 1, 0)),
                             lsp.Command(title=f"▶ run '{lens.name}'", command=RUN_CASE, arguments=[str(path), lens.name]))
                for lens in lenses]

    @server.command(RUN_CASE)
    def run_case(ls: PolicyServer, file: str, name: str | None = None) -> list[dict]:
        results = fixtures.run(Path(file), name)
        summary = "; ".join(f"{r['status']} {r['case']}" + (f": {r['message']}" if r["message"] else "")
                            for r in results) or f"no case named {name!r} in {file}"
        failed = any(r["status"] != "PASS" for r in results) or not results
        ls.window_show_message(lsp.ShowMessageParams(
            type=lsp.MessageType.Error if failed else lsp.MessageType.Info, message=summary))
        return results

    return server


def changed(ls: PolicyServer, uri: str, text: str) -> None:
    path = path_of(uri)
    if fixtures.is_fixture_file(path):
        publish_fixture(ls, path)
    elif in_set(path):
        publish(ls, ls.documents.update(path, text))


def publish_fixture(ls: PolicyServer, path: Path) -> None:
    problems, _ = fixtures.read(path)
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    found = [lsp.Diagnostic(range=lsp.Range(
        lsp.Position(p.line - 1, utf16_column(line_of(text, p.line - 1), max(p.column - 1, 0))),
        lsp.Position(p.line - 1, utf16_column(line_of(text, p.line - 1), len(line_of(text, p.line - 1))))),
        message=p.message, severity=lsp.DiagnosticSeverity.Error, source="policy-extender") for p in problems]
    ls.text_document_publish_diagnostics(lsp.PublishDiagnosticsParams(uri=uri_of(path), diagnostics=found))


def at(ls: PolicyServer, uri: str, position: lsp.Position) -> tuple[SetView | None, str, int, int]:
    """The document's set, its file name in the set, and the position as the checker counts."""
    path = path_of(uri)
    if not in_set(path):
        return None, path.name, 0, 0
    view = ls.documents.view(path)
    line, column = to_line_column(position, view.sources.get(path.name, ""))
    return view, path.name, line, column


def locations(view: SetView, spans) -> list[lsp.Location]:
    return [lsp.Location(uri_of(view.path_of(span.file)), to_range(span, view.sources.get(span.file, "")))
            for span in spans]


def serve_stdio() -> None:
    """Serve on stdin/stdout until the client says exit. pygls closes the stream it writes to,
    so it is given its own descriptor of stdout and the CLI's last flush finds ``sys.stdout`` open."""
    logging.basicConfig(level=logging.WARNING)
    build().start_io(sys.stdin.buffer, os.fdopen(os.dup(sys.stdout.fileno()), "wb"))
