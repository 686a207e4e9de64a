#!/usr/bin/env bash
# What each part of the OpenTelemetry export costs the proxy under load:
# the proxy alone on the last CPU, export off against export on to the
# receiver that answers without decoding (`OTEL_LOAD_PIN=1
# OTEL_LOAD_MODES=5 egress/load/otel.sh`), once with everything and once
# with each set of parts left out, in a build with the otel crate's
# `experiments` feature (GATEHOUSE_OTEL_LEAVE_OUT, otel/src/leave_out.rs).
# Prints, for each, the requests/s of export on over export off in each
# round and their median.
#
#     egress/load/otel_parts.sh [ROUNDS] [SECONDS]
#
# The experiments build is copied to target/otel-parts/ and the shipped
# binary rebuilt after it. Needs nginx and wrk (as otel.sh).
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds=${1:-7}
secs=${2:-5}
venv=$PWD/target/otel-venv
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c "import grpc, opentelemetry.proto" 2>/dev/null; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet -r tests/otel/requirements.txt
fi
mkdir -p target/otel-parts
cargo build --release -q -p gatehouse-egress --bin gatehouse-egress --features gatehouse-otel/experiments
cp target/release/gatehouse-egress target/otel-parts/gatehouse-egress
cargo build --release -q -p gatehouse-egress --bins --examples

echo "| left out | export on ÷ off, each round | median |"
echo "|---|---|---|"
for parts in "" send spans queue,spans attrs,queue,spans logs,spans tally,logs,spans; do
  table=target/otel-parts/run-${parts:-nothing}.md
  GATEHOUSE_OTEL_LEAVE_OUT=$parts OTEL_LOAD_PIN=1 OTEL_LOAD_MODES=5 \
    target/release/examples/otel_load target/otel-parts/gatehouse-egress "$venv/bin/python" "$secs" 16 "$rounds" >"$table" 2>&1 || true
  python3 - "$table" "${parts:-nothing (everything exported)}" <<'EOF'
import statistics, sys
off, on = {}, {}
for line in open(sys.argv[1]):
    f = [c.strip() for c in line.split("|")]
    if len(f) > 3 and f[1].isdigit():
        (off if f[2] == "export off" else on)[int(f[1])] = float(f[3])
ratios = [on[k] / off[k] for k in sorted(on) if off.get(k)]
if not ratios:
    sys.exit(f"no rounds in {sys.argv[1]}")
print(f"| {sys.argv[2]} | {' '.join(f'{r:.2f}' for r in ratios)} | **{statistics.median(ratios):.2f}** |")
EOF
done
echo
echo "(each run's table: target/otel-parts/)"
