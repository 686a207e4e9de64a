#!/usr/bin/env bash
# Host mode under load against squid's intercept mode and the host
# forwarding alone, from inside SANDBOXES network namespaces (see
# egress/examples/host_compare.rs). Root only.
# Usage: egress/load/host.sh [SECONDS] [SANDBOXES]
set -euo pipefail
cd "$(dirname "$0")/../.."
# CI builds every release binary once beforehand (.ci/run) and says so.
[ -n "${GATEHOUSE_PREBUILT:-}" ] || cargo build --release -q -p gatehouse-egress --bins --examples
exec target/release/examples/host_compare target/release/gatehouse-egress "$@"
