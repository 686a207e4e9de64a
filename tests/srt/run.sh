#!/usr/bin/env bash
# sandbox-runtime's real `srt proxy` (npm @anthropic-ai/sandbox-runtime,
# installed into target/srt when missing) deciding through
# `gatehouse-egress srt-decider`, with curl to loopback servers (e2e.py).
# EGRESS names the gatehouse-egress binary (default: the release build).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
version=0.0.83
prefix="$root/target/srt"
srt="$prefix/node_modules/.bin/srt"
if [ ! -x "$srt" ] || [ "$("$srt" proxy --version 2>/dev/null)" != "srt-proxy $version" ]; then
  mkdir -p "$prefix"
  # A package.json of its own, so that npm installs here and not into a
  # node_modules further up.
  [ -f "$prefix/package.json" ] || echo '{"private": true}' > "$prefix/package.json"
  # The package asks for Node >= 22.12; `srt proxy` runs on the Node 20
  # this machine kind has (checked by the suite itself).
  (cd "$prefix" && npm install --silent --no-audit --no-fund --engine-strict=false \
    "@anthropic-ai/sandbox-runtime@$version" >/dev/null)
fi
egress=${EGRESS:-}
if [ -z "$egress" ]; then
  cargo build --quiet --release -p gatehouse-egress --bin gatehouse-egress
  egress=target/release/gatehouse-egress
fi
timeout 180 python3 tests/srt/e2e.py "$srt" "$egress"
