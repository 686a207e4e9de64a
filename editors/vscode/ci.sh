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
# Bundled: the client and vscode-languageclient in one file, and nothing
# else of the repository's (sources, node_modules, tests, this script).
for f in extension/package.json extension/dist/extension.js extension/syntaxes/gatehouse.tmLanguage.json \
         extension/language-configuration.json; do
  unzip -l "$vsix" "$f" >/dev/null || { echo "$vsix lacks $f" >&2; exit 1; }
done
listing=$(unzip -Z1 "$vsix")
for bad in extension/ci.sh extension/extension.js extension/node_modules/ extension/test/ extension/package-lock.json; do
  if echo "$listing" | grep -q "^$bad"; then echo "$vsix ships $bad" >&2; exit 1; fi
done
node --check dist/extension.js
echo "packaged $vsix ($(echo "$listing" | wc -l) files, bundled)"
