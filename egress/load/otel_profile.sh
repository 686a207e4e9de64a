#!/usr/bin/env bash
# Where the proxy's CPU goes, a request at a time, with OpenTelemetry export
# off and on: runs `OTEL_LOAD_PIN=1 OTEL_LOAD_MODES=5 egress/load/otel.sh`
# (the proxy alone on the last CPU; export on = to the receiver that answers
# without decoding), samples that CPU with `perf record -C` for SECONDS
# inside each run, counts the requests the proxy served meanwhile (its
# /metrics), and prints the CPU time a request of each part: the proxy's
# own code, the export's code on the deciding thread, the kernel under the
# deciding thread, the export thread, everything else on that CPU; then the
# functions whose time a request grew the most.
#
#     egress/load/otel_profile.sh [SECONDS] [RUNS]
#
# Needs perf (cpu-clock sampling; no hardware counters needed), nginx, wrk.
set -euo pipefail
cd "$(dirname "$0")/../.."
secs=${1:-7}
runs=${2:-1}
freq=1999
out=$(mktemp -d /tmp/gatehouse-otel-profile.XXXXXX)
cpu=$(($(nproc) - 1))
# CI builds every release binary once beforehand (.ci/run) and says so.
[ -n "${GATEHOUSE_PREBUILT:-}" ] || cargo build --release -q -p gatehouse-egress --bins --examples

requests() {
  local body
  body=$(curl -s "http://$1/metrics" || true)
  awk '$1 ~ /^gatehouse_egress_requests_total([{]|$)/ { n += $NF } END { print n + 0 }' <<<"$body"
}

for run in $(seq 1 "$runs"); do
  OTEL_LOAD_PIN=1 OTEL_LOAD_MODES=5 egress/load/otel.sh $((secs + 6)) 16 1 >"$out/table-$run.txt" 2>&1 &
  load=$!
  for tag in off on; do
    if [ "$tag" = off ]; then pat='gatehouse-egress --policy'; else pat='gatehouse-egress --policy.*otel-exporter'; fi
    pid=
    until [ -n "$pid" ]; do
      pid=$(pgrep -f "$pat" | head -1 || true)
      sleep 0.2
    done
    metrics=$(tr '\0' ' ' <"/proc/$pid/cmdline" | sed -n 's/.*--metrics \([^ ]*\).*/\1/p')
    sleep 4
    before=$(requests "$metrics")
    perf record -q -C "$cpu" -F "$freq" -o "$out/$tag-$run.data" -- sleep "$secs" 2>/dev/null
    after=$(requests "$metrics")
    echo "$((after - before))" >"$out/$tag-$run.requests"
    perf report -i "$out/$tag-$run.data" --no-children -n --sort comm,dso,sym -q --stdio 2>/dev/null \
      | awk 'NF >= 5 { n = $2; comm = $3; dso = $4; $1 = $2 = $3 = $4 = $5 = ""; sub(/^ +/, ""); print n "\t" comm "\t" dso "\t" $0 }' \
      >"$out/$tag-$run.tsv"
    while kill -0 "$pid" 2>/dev/null; do sleep 0.2; done
  done
  wait "$load"
done

python3 - "$out" "$runs" "$freq" <<'EOF'
import collections, sys
out, runs, freq = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])

def part(comm, dso, sym):
    if comm == "tokio-rt-worker":
        if dso == "[kernel.kallsyms]":
            return "kernel, under the deciding thread"
        if "gatehouse_otel" in sym or "opentelemetry" in sym:
            return "export code on the deciding thread"
        return "the proxy's own code (and libc)"
    if comm == "gatehouse-otel":
        return "the export thread"
    if comm == "swapper":
        return "idle"
    return "everything else on the CPU"

parts = ["the proxy's own code (and libc)", "export code on the deciding thread",
         "kernel, under the deciding thread", "the export thread",
         "everything else on the CPU", "idle"]
us = {t: collections.Counter() for t in ("off", "on")}
syms = {t: collections.Counter() for t in ("off", "on")}
for t in ("off", "on"):
    for r in range(1, runs + 1):
        n = int(open(f"{out}/{t}-{r}.requests").read().strip() or 0)
        if n <= 0:
            sys.exit(f"no requests counted in the {t} run {r}")
        for line in open(f"{out}/{t}-{r}.tsv"):
            f = line.rstrip("\n").split("\t")
            if len(f) < 4:
                continue
            v = int(f[0]) / freq * 1e6 / n / runs
            us[t][part(f[1], f[2], f[3])] += v
            syms[t][(f[1], f[3])] += v
print(f"CPU time a request on the proxy's CPU, µs ({runs} run(s), perf record -C, {int(freq)} Hz)\n")
print("| part | export off | export on | change |")
print("|---|---|---|---|")
for p in parts:
    a, b = us["off"][p], us["on"][p]
    print(f"| {p} | {a:.2f} | {b:.2f} | {b - a:+.2f} |")
ta = sum(us["off"][p] for p in parts if p != "idle")
tb = sum(us["on"][p] for p in parts if p != "idle")
print(f"| **busy, all parts** | **{ta:.2f}** | **{tb:.2f}** | **{tb - ta:+.2f}** |")
print("\nThe functions whose time a request grew the most (thread, function, off → on, µs):\n")
grown = sorted(((syms["on"][k] - syms["off"][k], k) for k in set(syms["on"]) | set(syms["off"])), reverse=True)
for d, (comm, sym) in grown[:15]:
    print(f"- {comm}: `{sym}` {syms['off'][(comm, sym)]:.3f} → {syms['on'][(comm, sym)]:.3f} ({d:+.3f})")
EOF
echo
echo "(perf data and the load runs' tables: $out)"
