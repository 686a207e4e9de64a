#!/usr/bin/env bash
# sandbox-runtime's real `srt proxy` (npm @anthropic-ai/sandbox-runtime,
# installed into target/srt when missing) deciding through
# `gatehouse-egress srt-decider`, with curl to loopback servers (e2e.py).
# EGRESS names the gatehouse-egress binary (default: the release build).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
. tests/srt/install.sh
egress=${EGRESS:-}
if [ -z "$egress" ]; then
  cargo build --quiet --release -p gatehouse-egress --bin gatehouse-egress
  egress=target/release/gatehouse-egress
fi
timeout 180 python3 tests/srt/e2e.py "$srt" "$egress"
