#!/usr/bin/env bash
# squid (Debian's package, installed by .ci/run) deciding every request with
# `gatehouse-egress squid-helper` as its external ACL helper, curl to
# loopback servers (e2e.py). EGRESS names the gatehouse-egress binary
# (default: the release build).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
command -v squid >/dev/null || { echo "squid is not installed (apt-get install squid)" >&2; exit 1; }
egress=${EGRESS:-}
if [ -z "$egress" ]; then
  cargo build --quiet --release -p gatehouse-egress --bin gatehouse-egress
  egress=target/release/gatehouse-egress
fi
timeout 180 python3 tests/squid/e2e.py "$egress"
