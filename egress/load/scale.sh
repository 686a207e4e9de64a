#!/usr/bin/env bash
# Host mode at fleet scale against squid (issue 58): for each count of
# SANDBOXES (default 1 1000 10000), start, memory, idle CPU, a policy
# change through the control API, a whole reload, a kernel-passed flow's
# round trip and bulk upload, and CPU per kept-alive HTTP request; 4 of the
# sandboxes are network namespaces carrying traffic, the rest table
# entries (see egress/examples/host_scale.rs). Root only.
# Usage: egress/load/scale.sh [SECONDS] [SANDBOXES...]
set -euo pipefail
cd "$(dirname "$0")/../.."
# CI builds every release binary once beforehand (.ci/run) and says so.
[ -n "${GATEHOUSE_PREBUILT:-}" ] || cargo build --release -q -p gatehouse-egress --bins --examples
exec target/release/examples/host_scale target/release/gatehouse-egress "$@"
