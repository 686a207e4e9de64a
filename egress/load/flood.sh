#!/usr/bin/env bash
# Host mode under a flood of file events (issue 58): SANDBOXES sandboxes,
# and a writer rewriting one file beside their policies without pause for
# SECONDS; the daemon's CPU time from /proc over that time. Needs no root
# (--no-nftables, free ports).
# Usage: egress/load/flood.sh [SECONDS] [SANDBOXES] [BINARY]
set -euo pipefail
cd "$(dirname "$0")/../.."
seconds=${1:-10}
n=${2:-10000}
bin=${3:-$PWD/target/release/gatehouse-egress}
[ -n "${GATEHOUSE_PREBUILT:-}" ] || [ -n "${3:-}" ] || cargo build --release -q -p gatehouse-egress --bin gatehouse-egress
dir=$(mktemp -d /tmp/gatehouse-flood-XXXXXX)
trap 'kill "$pid" "$w" 2>/dev/null || true; rm -rf "$dir"' EXIT
python3 - "$dir" "$n" <<'PY'
import sys, os
d, n = sys.argv[1], int(sys.argv[2])
os.makedirs(f"{d}/p", exist_ok=True)
t = ['networks = ["10.0.0.0/8"]']
for k in range(1, n + 1):
    open(f"{d}/p/s{k}.policy", "w").write(
        f"policy s{k} {{\n  network {{\n    default deny\n    allow domain origin.test\n  }}\n}}\n")
    t.append(f'\n[[sandbox]]\nid = "s{k}"\naddresses = ["10.{k >> 16 & 255}.{k >> 8 & 255}.{k & 255}"]\npolicy = "p/s{k}.policy"')
open(f"{d}/sandboxes.toml", "w").write("\n".join(t) + "\n")
PY
"$bin" host --sandboxes "$dir/sandboxes.toml" --no-nftables --transparent-port 0 --dns-port 0 \
  --upstream-dns 127.0.0.1:9 2> "$dir/log" &
pid=$!
sleep 4
python3 -c "
import time
end = time.time() + $seconds + 1
while time.time() < end:
    open('$dir/p/junk', 'w').write('x')
" &
w=$!
sleep 0.5
a=$(awk '{print $14 + $15}' "/proc/$pid/stat")
sleep "$seconds"
b=$(awk '{print $14 + $15}' "/proc/$pid/stat")
pct=$(python3 -c "print(f'{($b - $a) / $(getconf CLK_TCK) / $seconds * 100:.1f}')")
echo "$n sandboxes, a writer flooding their directory $seconds s: $((b - a)) ticks of CPU ($pct % of a core)"
