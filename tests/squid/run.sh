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
# The shipped configuration parses (squid -k parse exits 1 on an error).
squid -k parse -f examples/integrations/squid/squid.conf >/dev/null 2>&1 \
  || { squid -k parse -f examples/integrations/squid/squid.conf; exit 1; }
echo "examples/integrations/squid/squid.conf: parsed by squid"
timeout 180 python3 tests/squid/e2e.py "$egress"
