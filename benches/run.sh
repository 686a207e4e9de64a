#!/usr/bin/env bash
# Every benchmark of BENCHMARKS.md in one run, then its tables and the plot.
#   benches/run.sh            the core benches and the peers (about 20 minutes)
#   PEERS_MAX=1000 benches/run.sh   peers up to 1 000 rules only
# Run it on an otherwise idle machine.
set -euo pipefail
cd "$(dirname "$0")/.."
lscpu | grep -E 'Model name|^CPU\(s\)' || true
cargo bench -p gatehouse-benches --bench decide -- --warm-up-time 1 --measurement-time 2
cargo bench -p gatehouse-benches --bench build -- --warm-up-time 1 --measurement-time 5
cargo bench -p gatehouse-benches --bench memory
cargo bench -p gatehouse-benches --bench swap
cargo bench -p gatehouse-peers --bench peers
python3 benches/report.py
python3 benches/peers/plot.py target/criterion benches/peers/peers.svg
