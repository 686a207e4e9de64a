#!/usr/bin/env bash
# Instructions and cache misses per decision on the realistic streams.
#
#   benches/perf.sh                  name, dns and addr at 1 000 and 100 000 rules
#   benches/perf.sh name 1000        one kind at one size
#
# With hardware counters (`perf stat` on bare metal) it reports perf's
# instructions, cycles, cache and branch misses. Virtual machines often
# have none (`<not supported>`); then it counts with cachegrind (valgrind's
# simulated first-level and last-level caches). Either way, the policy is
# built in both runs and only the difference between N and 2N decisions is
# reported, so that building the policy is not counted.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q -p gatehouse-benches --bin stream
bin=target/release/stream
kinds=${1:-"name dns addr"}
sizes=${2:-"1000 100000"}
hw=0
if perf stat -e instructions -x, true 2>&1 | grep -q '^[0-9]'; then hw=1; fi
for kind in $kinds; do
  for rules in $sizes; do
    if [ $hw = 1 ]; then
      n=20000000
      stat() { perf stat -x, -e instructions,cycles,cache-misses,branch-misses "$bin" "$kind" "$rules" "$1" 2>&1 >/dev/null | cut -d, -f1; }
      a=($(stat $n)); b=($(stat $((2 * n))))
      awk -v k="$kind" -v r="$rules" -v n=$n -v i1="${a[0]}" -v i2="${b[0]}" -v c1="${a[1]}" -v c2="${b[1]}" \
          -v m1="${a[2]}" -v m2="${b[2]}" -v b1="${a[3]}" -v b2="${b[3]}" 'BEGIN {
        printf "%s @ %s rules: %.0f instructions, %.0f cycles, %.2f cache misses, %.2f branch misses per decision\n",
          k, r, (i2-i1)/n, (c2-c1)/n, (m2-m1)/n, (b2-b1)/n }'
    else
      n=200000
      cg() {
        valgrind --tool=cachegrind --cache-sim=yes --cachegrind-out-file=/dev/null "$bin" "$kind" "$rules" "$1" 2>&1 |
          awk '/I +refs/ {gsub(",","",$4); i=$4} /D1  misses/ {gsub(",","",$4); d=$4} /LLd misses/ {gsub(",","",$4); l=$4} END {print i, d, l}'
      }
      a=($(cg $n)); b=($(cg $((2 * n))))
      awk -v k="$kind" -v r="$rules" -v n=$n -v i1="${a[0]}" -v i2="${b[0]}" -v d1="${a[1]}" -v d2="${b[1]}" \
          -v l1="${a[2]}" -v l2="${b[2]}" 'BEGIN {
        printf "%s @ %s rules: %.0f instructions, %.2f D1 misses, %.3f last-level misses per decision (cachegrind)\n",
          k, r, (i2-i1)/n, (d2-d1)/n, (l2-l1)/n }'
    fi
  done
done
