#!/usr/bin/env bash
# docs/tutorial.md, executed: every command in it, every output it shows
# (tests/tutorial/run.py). BIN names the folder of policyc and
# gatehouse-egress (default: target/release).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
exec python3 "$root/tests/tutorial/run.py" "$root/docs/tutorial.md" "${BIN:-$root/target/release}"
