// Tokenises .policy files with VS Code's own TextMate engine (vscode-textmate, with the
// Oniguruma regex engine VS Code uses) and the extension's grammar; prints, as JSON, every token
// of every file: {file: [[line, text, [scopes...]], ...]}. tests/lsp/test_vscode.py reads it.
// Usage: node test/tokens.js FILE...
"use strict";
const fs = require("fs");
const path = require("path");
const vsctm = require("vscode-textmate");
const oniguruma = require("vscode-oniguruma");

const wasm = fs.readFileSync(path.join(path.dirname(require.resolve("vscode-oniguruma")), "onig.wasm"));
const onigLib = oniguruma.loadWASM(wasm.buffer).then(() => ({
  createOnigScanner: (patterns) => new oniguruma.OnigScanner(patterns),
  createOnigString: (text) => new oniguruma.OnigString(text),
}));
const grammarPath = path.join(__dirname, "..", "syntaxes", "policy.tmLanguage.json");
const registry = new vsctm.Registry({
  onigLib,
  loadGrammar: async (scopeName) => scopeName === "source.policy"
    ? vsctm.parseRawGrammar(fs.readFileSync(grammarPath, "utf8"), grammarPath) : null,
});

async function main(files) {
  const grammar = await registry.loadGrammar("source.policy");
  const out = {};
  for (const file of files) {
    let stack = vsctm.INITIAL;
    const tokens = [];
    fs.readFileSync(file, "utf8").split("\n").forEach((line, number) => {
      const result = grammar.tokenizeLine(line, stack);
      for (const token of result.tokens) {
        tokens.push([number + 1, line.slice(token.startIndex, token.endIndex), token.scopes]);
      }
      stack = result.ruleStack;
    });
    out[file] = tokens;
  }
  process.stdout.write(JSON.stringify(out));
}

main(process.argv.slice(2)).catch((error) => { console.error(error); process.exit(1); });
