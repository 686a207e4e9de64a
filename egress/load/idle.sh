#!/usr/bin/env bash
# An idle host-mode daemon's cost (issue 58): SANDBOXES sandboxes, each
# with a policy file of its own, nothing sent; the daemon's CPU time
# (utime + stime from /proc) over SECONDS after start, its resident
# memory, and how long a change to one policy takes to be in force.
# Needs no root: no nftables table is installed (--no-nftables) and the
# listeners take free ports.
# Usage: egress/load/idle.sh [SECONDS] [SANDBOXES]
set -euo pipefail
cd "$(dirname "$0")/../.."
seconds=${1:-60}
n=${2:-1000}
[ -n "${GATEHOUSE_PREBUILT:-}" ] || cargo build --release -q -p gatehouse-egress --bin gatehouse-egress
bin=$PWD/target/release/gatehouse-egress
dir=$(mktemp -d /tmp/gatehouse-idle-XXXXXX)
trap 'kill "$pid" 2>/dev/null || true; rm -rf "$dir"' EXIT
python3 - "$dir" "$n" <<'EOF'
import sys, os
d, n = sys.argv[1], int(sys.argv[2])
os.makedirs(f"{d}/p", exist_ok=True)
t = ['networks = ["10.0.0.0/8"]']
for k in range(1, n + 1):
    open(f"{d}/p/s{k}.policy", "w").write(
        f"policy s{k} {{\n  network {{\n    default deny\n    allow domain origin.test\n    deny domain denied.test\n  }}\n}}\n")
    t.append(f'\n[[sandbox]]\nid = "s{k}"\naddresses = ["10.{k >> 16 & 255}.{k >> 8 & 255}.{k & 255}"]\npolicy = "p/s{k}.policy"')
open(f"{d}/sandboxes.toml", "w").write("\n".join(t) + "\n")
EOF
"$bin" host --sandboxes "$dir/sandboxes.toml" --no-nftables --transparent-port 0 --dns-port 0 \
  --upstream-dns 127.0.0.1:9 2> "$dir/log" &
pid=$!
# Started when its table is loaded: give it a few seconds, then measure.
sleep 5
kill -0 "$pid" || { cat "$dir/log"; exit 1; }
ticks=$(getconf CLK_TCK)
cpu() { awk '{print $14 + $15}' "/proc/$pid/stat"; }
a=$(cpu)
sleep "$seconds"
b=$(cpu)
rss=$(awk '/VmRSS/ {print $2}' "/proc/$pid/status")
pct=$(python3 -c "print(f'{($b - $a) / $ticks / $seconds * 100:.3f}')")
# A change to one policy: how long until the daemon says it is in force.
before=$(grep -c "reloaded\|in force" "$dir/log" || true)
start=$(date +%s%N)
sed -i 's/deny domain denied.test/deny domain denied2.test/' "$dir/p/s1.policy"
while [ "$(grep -c "reloaded\|in force" "$dir/log" || true)" = "$before" ]; do
  sleep 0.01
  [ $(( ($(date +%s%N) - start) / 1000000 )) -lt 10000 ] || break
done
ms=$(( ($(date +%s%N) - start) / 1000000 ))
echo "$n sandboxes, idle $seconds s: $((b - a)) ticks of CPU ($pct % of a core), RSS $rss KiB; a policy change seen in $ms ms"
# The change must have been seen (a missed notification would leave the
# old policy in force until a restart).
if [ "$(grep -c "reloaded\|in force" "$dir/log" || true)" = "$before" ]; then
  echo "the change to s1.policy was not seen within 10 s" >&2
  cat "$dir/log" >&2
  exit 1
fi
