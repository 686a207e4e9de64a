#!/usr/bin/env bash
# The load comparison of gatehouse-egress, squid, tinyproxy and nginx direct,
# keep-alive and one connection per request, on loopback (see
# egress/examples/compare.rs). Usage: egress/load/compare.sh [SECONDS] [CONNECTIONS]
set -euo pipefail
cd "$(dirname "$0")/../.."
# CI builds every release binary once beforehand (.ci/run) and says so.
[ -n "${GATEHOUSE_PREBUILT:-}" ] || cargo build --release -q -p gatehouse-egress --bins --examples
exec target/release/examples/compare target/release/gatehouse-egress "$@"
