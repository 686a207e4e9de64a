#!/usr/bin/env bash
# Every benchmark of BENCHMARKS.md in one run, then its tables, the targets
# (met or missed) and the plot.
#   benches/run.sh            core benches, peers and streams, perf figures (about 45 minutes)
#   PEERS_MAX=1000 benches/run.sh   peers up to 1 000 rules only
#   PERF=0 benches/run.sh     without the instruction and cache-miss counts
# Run it on an otherwise idle machine. Everything goes to stdout; keep it
# (`benches/run.sh | tee bench.log`).
set -euo pipefail
cd "$(dirname "$0")/.."
lscpu | grep -E 'Model name|^CPU\(s\)' || true
cargo bench -p gatehouse-benches --bench decide -- --warm-up-time 1 --measurement-time 2
cargo bench -p gatehouse-benches --bench build -- --warm-up-time 1 --measurement-time 5
cargo bench -p gatehouse-benches --bench memory
cargo bench -p gatehouse-benches --bench swap
cargo bench -p gatehouse-benches --bench otel -- --warm-up-time 1 --measurement-time 3
cargo bench -p gatehouse-peers --bench peers
python3 benches/report.py
python3 benches/peers/plot.py target/criterion benches/peers/peers.svg
if [ "${PERF:-1}" = 1 ]; then benches/perf.sh; fi
