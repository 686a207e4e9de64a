#!/usr/bin/env bash
# The control API's changes at fleet scale, without root (issue 58): host
# mode with SANDBOXES table entries (--no-nftables, free ports), then CALLS
# of each change on the control socket, one after another — the first PUT
# of a table entry's policy (which points the entry at the state directory
# and so changes the table file), a sandbox added (POST), its policy put
# (PUT), it removed (DELETE) — each call's time, median and slowest, and
# the daemon's CPU over the calls and 2 s after (its reload thread looks at
# the files each change wrote).
# Usage: egress/load/control.sh [SANDBOXES] [CALLS]
#   OWN=1: a policy file for each sandbox (else four files shared);
#   GAP=SECONDS: a pause before each call (0.1 lands a call while the
#   reload thread looks at the last change's files).
set -euo pipefail
cd "$(dirname "$0")/../.."
n=${1:-10000}
calls=${2:-9}
[ -n "${GATEHOUSE_PREBUILT:-}" ] || cargo build --release -q -p gatehouse-egress --bin gatehouse-egress
bin=${GATEHOUSE_EGRESS:-$PWD/target/release/gatehouse-egress}
dir=$(mktemp -d /tmp/gatehouse-control-XXXXXX)
pid=
trap '[ -z "$pid" ] || kill "$pid" 2>/dev/null || true; rm -rf "$dir"' EXIT
python3 - "$dir" "$n" "${OWN:-}" <<'PY'
import os, sys
d, n, own = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1"
os.makedirs(f"{d}/p", exist_ok=True)
text = "policy p {\n  network {\n    default deny\n    allow domain origin.test\n    allow domain db.test port 5432, 5433\n  }\n}\n"
t = ['networks = ["10.0.0.0/8"]']
for k in range(1, n + 1):
    name = f"s{k}" if own else f"s{k % 4}"
    if own or k <= 4:
        open(f"{d}/p/{name}.policy", "w").write(text)
    t.append(f'\n[[sandbox]]\nid = "s{k}"\naddresses = ["10.{k >> 16 & 255}.{k >> 8 & 255}.{k & 255}"]\npolicy = "p/{name}.policy"')
open(f"{d}/sandboxes.toml", "w").write("\n".join(t) + "\n")
PY
"$bin" host --sandboxes "$dir/sandboxes.toml" --no-nftables --transparent-port 0 --dns-port 0 \
  --upstream-dns 127.0.0.1:9 --control "$dir/control.sock" 2> "$dir/log" &
pid=$!
for _ in $(seq 600); do [ -S "$dir/control.sock" ] && break; sleep 0.05; done
[ -S "$dir/control.sock" ] || { cat "$dir/log"; exit 1; }
sleep 2
cpu() { awk '{print $14 + $15}' "/proc/$pid/stat"; }
a=$(cpu)
python3 - "$dir/control.sock" "$n" "$calls" "${GAP:-0}" "${OWN:-}" <<'PY'
import json, socket, statistics, sys, time
path, n, calls, gap = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
own = sys.argv[5] == "1"
def call(method, url, body, want):
    time.sleep(gap)
    s = socket.socket(socket.AF_UNIX)
    s.connect(path)
    b = body.encode()
    t = time.perf_counter()
    s.sendall(f"{method} {url} HTTP/1.1\r\nHost: h\r\nContent-Length: {len(b)}\r\nConnection: close\r\n\r\n".encode() + b)
    data = b""
    while True:
        c = s.recv(65536)
        if not c:
            break
        data += c
    t = (time.perf_counter() - t) * 1000
    s.close()
    status = int(data.split()[1])
    assert status == want, f"{method} {url}: {status} {data[-300:]!r}"
    return t
text = "policy a {\n  network {\n    default deny\n    allow domain origin.test\n  }\n}\n"
rows = {"PUT, first (the table file changes)": [], "POST": [], "PUT": [], "DELETE": []}
for i in range(min(calls, n)):
    rows["PUT, first (the table file changes)"].append(call("PUT", f"/v1/sandboxes/s{i + 1}/policy", text, 200))
for i in range(calls):
    body = json.dumps({"id": f"added{i}", "addresses": [f"10.250.{i >> 8 & 255}.{i & 255 or 1}"], "policy": text})
    rows["POST"].append(call("POST", "/v1/sandboxes", body, 201))
    rows["PUT"].append(call("PUT", f"/v1/sandboxes/added{i}/policy", text.replace("origin", f"o{i}"), 200))
    rows["DELETE"].append(call("DELETE", f"/v1/sandboxes/added{i}", "", 204))
print(f"{n} sandboxes ({'a policy file each' if own else 'four shared policy files'}), {calls} calls of each, {gap} s before each:")
for k, v in rows.items():
    if v:
        print(f"  {k}: median {statistics.median(v):.2f} ms, slowest {max(v):.2f} ms")
PY
sleep 2
b=$(cpu)
echo "  the daemon's CPU over the calls and 2 s after: $((b - a)) ticks of $(getconf CLK_TCK) a second"
