#!/usr/bin/env bash
# What gatehouse-egress holds for a large policy: resident memory after the
# first load, after RELOADS reloads, and the high-water mark, for policies of
# each size in RULES (half domain rules, half CIDR rules, as the red team's
# 8 MiB policy of issue 35). The figures of docs/egress.md, "Memory".
#   egress/load/memory.sh [RELOADS] [RULES...]
set -euo pipefail
cd "$(dirname "$0")/../.."
reloads="${1:-20}"; shift || true
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(0 50000 100000 200000)
# CI builds every release binary once beforehand (.ci/run) and says so.
[ -n "${GATEHOUSE_PREBUILT:-}" ] || cargo build --release -q -p gatehouse-egress --bin gatehouse-egress
bin=$PWD/target/release/gatehouse-egress
dir=$(mktemp -d); trap 'kill "$pid" 2>/dev/null || true; rm -rf "$dir"' EXIT
pid=
kib() { awk -v k="$1" '$1==k":" {print $2}' "/proc/$pid/status"; }
reloaded() { grep -c "policy reloaded" "$dir/log" || true; }
wait_for() { # until the log holds N reloads (or 60 s)
  for _ in $(seq 600); do [ "$(reloaded)" -ge "$1" ] && return 0; sleep 0.1; done
  echo "no reload $1" >&2; exit 1
}
printf '| rules | policy bytes | after load (MiB) | after %s reloads (MiB) | peak (MiB) | bytes a rule, steady |\n|---|---|---|---|---|---|\n' "$reloads"
base=
for n in "${sizes[@]}"; do
  python3 - "$n" > "$dir/p.policy" <<'EOF'
import sys
n = int(sys.argv[1])
print("policy big {\n  network {\n    default deny\n    local deny")
for i in range(n):
    if i % 2 == 0:
        print(f"    allow domain h{i:06d}.example{i % 97}.com")
    else:
        a = (i * 2654435761) & 0xffffffff
        print(f"    allow cidr {a >> 24 & 255}.{a >> 16 & 255}.{a >> 8 & 255}.0/24")
print("  }\n}")
EOF
  "$bin" --policy "$dir/p.policy" --http 127.0.0.1:0 > "$dir/log" 2>&1 &
  pid=$!
  for _ in $(seq 600); do grep -q "http proxy on" "$dir/log" && break; sleep 0.1; done
  sleep 1
  loaded=$(kib VmRSS)
  for i in $(seq "$reloads"); do
    echo "# reload $i" >> "$dir/p.policy"
    wait_for "$i"
  done
  sleep 1
  after=$(kib VmRSS); peak=$(kib VmHWM)
  kill "$pid"; wait "$pid" 2>/dev/null || true
  [ -n "$base" ] || base=$after
  per=$([ "$n" -gt 0 ] && echo $(( (after - base) * 1024 / n )) || echo "—")
  printf '| %s | %s | %.1f | %.1f | %.1f | %s |\n' "$n" "$(stat -c %s "$dir/p.policy")" \
    "$(echo "$loaded/1024" | bc -l)" "$(echo "$after/1024" | bc -l)" "$(echo "$peak/1024" | bc -l)" "$per"
done
