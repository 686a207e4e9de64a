// Starts `policyc lsp` for .policy files. Everything the editor shows —
// diagnostics, formatting, hover, completion, go-to-definition, symbols and
// the "Run test" lenses — comes from the server; this file only starts it.
"use strict";

const vscode = require("vscode");
const { LanguageClient } = require("vscode-languageclient/node");

let client;

function activate(context) {
  const command = vscode.workspace.getConfiguration("gatehouse").get("server.path") || "policyc";
  const server = { command, args: ["lsp"] };
  client = new LanguageClient(
    "gatehouse",
    "gatehouse (policyc lsp)",
    { run: server, debug: server },
    { documentSelector: [{ scheme: "file", language: "gatehouse" }, { scheme: "untitled", language: "gatehouse" }] },
  );
  context.subscriptions.push(client);
  return client.start();
}

function deactivate() {
  return client ? client.stop() : undefined;
}

module.exports = { activate, deactivate };
