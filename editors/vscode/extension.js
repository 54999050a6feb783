// The VS Code client of policy-extender's language server (docs/editors.md): starts the command
// of `policyExtender.command` (default `policy-extender lsp`) over stdio for .policy files and
// fixture files, and runs a fixture case from its code lens.
"use strict";
const vscode = require("vscode");
const { LanguageClient, TransportKind } = require("vscode-languageclient/node");

let client;

function activate(context) {
  const [command, ...args] = vscode.workspace.getConfiguration("policyExtender").get("command");
  const serverOptions = { command, args, transport: TransportKind.stdio };
  const clientOptions = {
    documentSelector: [
      { scheme: "file", language: "policy" },
      { scheme: "file", pattern: "**/*.fixtures.yaml" },
      { scheme: "file", pattern: "**/*values.yaml" },
    ],
    synchronize: { fileEvents: vscode.workspace.createFileSystemWatcher("**/{*.policy,*values.yaml}") },
  };
  client = new LanguageClient("policy-extender", "policy-extender", serverOptions, clientOptions);
  context.subscriptions.push(client);
  return client.start().catch((error) => {
    vscode.window.showErrorMessage(
      `policy-extender: could not start \`${[command, ...args].join(" ")}\` (${error.message}). ` +
      "Install it with pip install 'policy-extender[lsp]' or set policyExtender.command.");
  });
}

function deactivate() {
  return client ? client.stop() : undefined;
}

module.exports = { activate, deactivate };
