#!/usr/bin/env bash
# The VS Code extension in CI: install its npm packages (from the lock
# file), check the client script, run the grammar's tests (assertions and
# snapshots, vscode-tmgrammar-test) and package it with @vscode/vsce into
# target/gatehouse-policy.vsix.
set -euo pipefail
cd "$(dirname "$0")"
if [ ! -d node_modules/vscode-tmgrammar-test ] || [ ! -d node_modules/@vscode/vsce ]; then
  npm ci --no-audit --no-fund --loglevel=error
fi
node --check extension.js
node -e 'require.resolve("vscode-languageclient/node")'
npm test
npm run --silent package
vsix=../../target/gatehouse-policy.vsix
for f in extension/package.json extension/extension.js extension/syntaxes/gatehouse.tmLanguage.json \
         extension/language-configuration.json extension/node_modules/vscode-languageclient/package.json; do
  unzip -l "$vsix" "$f" >/dev/null || { echo "$vsix lacks $f" >&2; exit 1; }
done
echo "packaged $vsix"
