#!/usr/bin/env bash
# End-to-end tests of `policyc lsp` through a real LSP client (pytest-lsp,
# from PyPI, over stdio). Builds policyc unless POLICYC names a binary;
# installs the client in target/lsp-venv when it is missing.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
if [ -z "${POLICYC:-}" ]; then
  cargo build --quiet --release --bin policyc
  export POLICYC="$root/target/release/policyc"
fi
venv="$root/target/lsp-venv"
if [ ! -x "$venv/bin/pytest" ]; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet -r tests/lsp/requirements.txt
fi
timeout 300 "$venv/bin/pytest" -q -c tests/lsp/pytest.ini tests/lsp "$@"
