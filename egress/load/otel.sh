#!/usr/bin/env bash
# OpenTelemetry export under load: export off, on, on with a hanging
# receiver, on with refused connections, off again — one run, side by side
# (egress/examples/otel_load.rs). Usage: egress/load/otel.sh [SECONDS] [CONNECTIONS]
set -euo pipefail
cd "$(dirname "$0")/../.."
venv=$PWD/target/otel-venv
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c "import grpc, opentelemetry.proto" 2>/dev/null; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet -r tests/otel/requirements.txt
fi
# CI builds every release binary once beforehand (.ci/run) and says so.
[ -n "${GATEHOUSE_PREBUILT:-}" ] || cargo build --release -q -p gatehouse-egress --bins --examples
exec target/release/examples/otel_load target/release/gatehouse-egress "$venv/bin/python" "$@"
