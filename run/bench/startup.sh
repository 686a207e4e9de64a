#!/usr/bin/env bash
# Start-up of gatehouse-run beside sandbox-runtime's srt (issue 54,
# BENCHMARKS.md): the same real settings file, `true` as the command, run
# PAIRS times alternately (srt, gatehouse-run, srt, …) in one workspace;
# prints each side's median and quartiles in ms and the ratio of medians.
# gatehouse-run runs the file as `policyc import srt` writes it, with
# --allow-weaker (its globs), starting its proxy and namespaces each time.
#   BIN=target/release run/bench/startup.sh [SETTINGS.json] [PAIRS]
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
bin=${BIN:-target/release}
case "$bin" in /*) ;; *) bin=$root/$bin ;; esac
settings=${1:-tests/data/import/srt-public/code-mode-mcp.json}
pairs=${2:-20}
. tests/srt/install.sh
work=$(mktemp -d /srv/gh-startup.XXXXXX 2>/dev/null || mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/ws/.git" "$work/home"
"$bin/policyc" import srt "$settings" > "$work/p.policy" 2>/dev/null
python3 - "$node22" "$srt_cli" "$bin/gatehouse-run" "$settings" "$work" "$pairs" <<'PY'
import os, statistics, subprocess, sys, time
node, cli, run, settings, work, pairs = sys.argv[1:]
env = dict(os.environ, HOME=f"{work}/home")
cmds = {
    "srt": [node, cli, "--settings", os.path.abspath(settings), "true"],
    "gatehouse-run": [run, f"{work}/p.policy", "--allow-weaker", "--", "true"],
}
times = {k: [] for k in cmds}
for i in range(int(pairs) + 1):
    for k, c in cmds.items():
        t = time.perf_counter()
        r = subprocess.run(c, cwd=f"{work}/ws", env=env, capture_output=True)
        dt = (time.perf_counter() - t) * 1000
        if r.returncode != 0:
            sys.exit(f"{k} failed ({r.returncode}): {r.stderr.decode()[-500:]}")
        if i:  # the first pair warms the caches
            times[k].append(dt)
for k, v in times.items():
    q = statistics.quantiles(v, n=4)
    print(f"{k:14} median {statistics.median(v):7.1f} ms  (quartiles {q[0]:.1f}–{q[2]:.1f}, {len(v)} runs)")
ratio = statistics.median(times["gatehouse-run"]) / statistics.median(times["srt"])
print(f"gatehouse-run / srt: {ratio:.2f}")
PY
