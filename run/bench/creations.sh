#!/usr/bin/env bash
# What the names guard costs (docs/run.md, "The names guard"): 5 000
# renames, 2 000 folders made and 5 000 files created, each kind timed
# inside the command, bare, under srt and under gatehouse-run, ROUNDS times
# each alternately, in a workspace on a tmpfs (when run as root) so that
# the disk does not hide the system calls' cost; prints each one's median
# µs a call.
#   BIN=target/release run/bench/creations.sh [ROUNDS]
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
bin=${BIN:-target/release}
case "$bin" in /*) ;; *) bin=$root/$bin ;; esac
rounds=${1:-5}
. tests/srt/install.sh
work=$(mktemp -d /srv/gh-creations.XXXXXX 2>/dev/null || mktemp -d)
mkdir -p "$work/ws" "$work/home"
[ "$(id -u)" = 0 ] && mount -t tmpfs tmpfs "$work/ws"
trap 'umount "$work/ws" 2>/dev/null; rm -rf "$work"' EXIT
mkdir -p "$work/ws/.git"
cat > "$work/settings.json" <<'JSON'
{"network": {"allowedDomains": [], "deniedDomains": []},
 "filesystem": {"denyRead": [], "allowWrite": ["."], "denyWrite": []}}
JSON
"$bin/policyc" import srt "$work/settings.json" > "$work/p.policy" 2>/dev/null
cat > "$work/mk.py" <<'PY'
import os, shutil, sys, time
base = sys.argv[1]
os.makedirs(base)
for f in range(5000):
    with open(f"{base}/f{f}.txt", "w") as fh:
        fh.write("x")
t = time.perf_counter()
for f in range(5000):
    os.rename(f"{base}/f{f}.txt", f"{base}/g{f}.txt")
r = (time.perf_counter() - t) / 5000
t = time.perf_counter()
for d in range(2000):
    os.mkdir(f"{base}/d{d}")
m = (time.perf_counter() - t) / 2000
t = time.perf_counter()
for f in range(5000):
    with open(f"{base}/h{f}.txt", "w") as fh:
        fh.write("x")
o = (time.perf_counter() - t) / 5000
print(f"{r * 1e6:.1f} {m * 1e6:.1f} {o * 1e6:.1f}")
shutil.rmtree(base)
PY
python3 - "$node22" "$srt_cli" "$bin/gatehouse-run" "$work" "$rounds" <<'PY'
import os, statistics, subprocess, sys
node, cli, run, work, rounds = sys.argv[1:]
env = dict(os.environ, HOME=f"{work}/home")
mk = ["python3", f"{work}/mk.py", "t"]
cmds = {
    "bare": mk,
    "srt": [node, cli, "--settings", f"{work}/settings.json"] + mk,
    "gatehouse-run": [run, f"{work}/p.policy", "--"] + mk,
}
times = {k: [] for k in cmds}
for _ in range(int(rounds)):
    for k, c in cmds.items():
        r = subprocess.run(c, cwd=f"{work}/ws", env=env, capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit(f"{k} failed: {r.stderr[-400:]}")
        times[k].append([float(x) for x in r.stdout.split()[-3:]])
print(f"{'':14} {'rename':>8} {'mkdir':>8} {'create':>8}   (µs a call, median of {rounds} runs)")
for k, v in times.items():
    med = [statistics.median(col) for col in zip(*v)]
    print(f"{k:14} " + " ".join(f"{x:8.1f}" for x in med))
PY
