#!/usr/bin/env bash
# Runs every fuzz target for SECONDS (default 30) on a seed corpus built from
# policies/ and tests/data/; a crash fails the script.
#   fuzz/run.sh [SECONDS] [TARGET...]
#   fuzz/run.sh ci      deterministic: a fixed seed and number of runs per
#                       target (what CI runs; the same result every time)
set -euo pipefail
cd "$(dirname "$0")"
seconds="${1:-30}"; shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(parse plain fmt_roundtrip query artifact host differential wire_http wire_tls wire_socks wire_dns)
if ! cargo fuzz --version >/dev/null 2>&1; then cargo install cargo-fuzz; fi
if ! rustup toolchain list | grep -q nightly; then rustup toolchain install nightly --profile minimal; fi

# Seed corpora (rebuilt each run; corpus/ is not committed).
mkdir -p corpus/parse corpus/plain corpus/fmt_roundtrip corpus/query corpus/artifact corpus/host corpus/differential corpus/wire_http corpus/wire_tls corpus/wire_socks corpus/wire_dns
for f in ../policies/*.policy ../policies/*/*.policy ../tests/data/*.policy ../tests/data/*/*.policy; do
  [ -f "$f" ] || continue
  name=$(echo "$f" | tr '/.' '__')
  cp "$f" "corpus/parse/$name"; cp "$f" "corpus/plain/$name"; cp "$f" "corpus/fmt_roundtrip/$name"
done
grep -h "^\s*expect" ../policies/*.policy ../tests/data/*.policy | sed -E 's/^\s*expect\s+\w+\s+//; s/\s+because\s+\w+\s*$//' \
  | awk 'NR <= 400' | split -l 1 - corpus/query/q_  # awk reads to the end: head would close the pipe (SIGPIPE under pipefail)
printf 'github.com\nGitHub.COM.\n127。0。0。1\n[::ffff:10.1.2.3]\n2130706433\nxn--bcher-kva.example\nbücher.example\n' | split -l 1 - corpus/host/h_
printf 'GATEHSE\0' > corpus/artifact/magic
# Edits of a shipped policy's payload (fuzz_targets/artifact.rs): none, one.
printf '\x01' > corpus/artifact/payload_1
printf '\x02\x00\x10\x00\x07' > corpus/artifact/payload_2
# Heads, a response and authorities for wire_http; a real ClientHello
# (Python's TLS) for wire_tls; SOCKS5 messages; DNS messages (Python's
# struct, no resolver).
printf 'GET http://a.test:8080/x?y HTTP/1.1\r\nHost: a.test:8080\r\nContent-Length: 3\r\n\r\n' > corpus/wire_http/get
printf 'CONNECT [::1]:443 HTTP/1.1\r\nHost: [::1]:443\r\n\r\n' > corpus/wire_http/connect
printf 'POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n' > corpus/wire_http/chunked
printf 'HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n' > corpus/wire_http/response
printf 'api.github.com:443' > corpus/wire_http/authority
python3 -c "
import ssl
c = ssl.create_default_context(); i, o = ssl.MemoryBIO(), ssl.MemoryBIO()
s = c.wrap_bio(i, o, server_hostname='github.com')
try: s.do_handshake()
except ssl.SSLWantReadError: pass
open('corpus/wire_tls/client_hello', 'wb').write(o.read())
"
printf '\x05\x01\x00' > corpus/wire_socks/greeting
printf '\x05\x01\x00\x03\x0aapi.github\x01\xbb' > corpus/wire_socks/connect_name
printf '\x05\x03\x00\x01\x7f\x00\x00\x01\x00\x35' > corpus/wire_socks/associate
printf '\x00\x00\x00\x01\x7f\x00\x00\x01\x00\x35query' > corpus/wire_socks/datagram
python3 -c "
import struct
def name(n): return b''.join(bytes([len(l)]) + l for l in n.encode().split(b'.')) + b'\\0'
def q(n, t=1, c=1, flags=0x0100, extra=b''):
    return struct.pack('>HHHHHH', 0x1234, flags, 1, 0, 0, 0) + name(n) + struct.pack('>HH', t, c)
open('corpus/wire_dns/a', 'wb').write(q('api.github.com'))
open('corpus/wire_dns/aaaa', 'wb').write(q('example.test', 28))
open('corpus/wire_dns/chaos', 'wb').write(q('version.bind', 16, 3))
# An answer: a CNAME then an A record (name compression pointing at the question).
ans = struct.pack('>HHHHHH', 0x1234, 0x8180, 1, 2, 0, 0) + name('www.a.test') + struct.pack('>HH', 1, 1)
ans += struct.pack('>HHHIH', 0xc00c, 5, 1, 60, 8) + name('b.test')[:8]
ans += name('b.test') + struct.pack('>HHIH', 1, 1, 30, 4) + bytes([192, 0, 2, 1])
open('corpus/wire_dns/answer', 'wb').write(ans)
"

declare -A ci_runs=([parse]=15000 [plain]=5000 [fmt_roundtrip]=15000 [query]=300000 [artifact]=150000 [host]=500000 [differential]=30000 [wire_http]=500000 [wire_tls]=3000000 [wire_socks]=3000000 [wire_dns]=500000)
# The grammar's tokens, for the targets that read policy text.
declare -A dict=([parse]=-dict=policy.dict [plain]=-dict=policy.dict [fmt_roundtrip]=-dict=policy.dict)
# Every target built at once (one cargo run, both cores), then run two at a
# time (each libFuzzer process uses one core); each target's lines are
# printed when it ends.
cargo +nightly fuzz build -s none
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
one() {  # one TARGET
  local t=$1 limit
  if [ "$seconds" = ci ]; then
    echo "== fuzz $t: ${ci_runs[$t]} runs, seed 1"
    limit=(-seed=1 -runs="${ci_runs[$t]}")
  else
    echo "== fuzz $t for ${seconds}s"
    limit=(-max_total_time="$seconds")
  fi
  cargo +nightly fuzz run -s none "$t" "corpus/$t" -- "${limit[@]}" ${dict[$t]:-} -rss_limit_mb=2048 -timeout=10 2>&1 \
    | grep -E "^#[0-9]+.*DONE|Done [0-9]+ runs|ERROR|panicked|SUMMARY|stat::number_of_executed_units|crash-" || true
}
running=()
for t in "${targets[@]}"; do
  one "$t" > "$logs/$t" 2>&1 &
  running+=("$!")
  if [ ${#running[@]} -ge 2 ]; then
    wait "${running[0]}"
    running=("${running[@]:1}")
  fi
done
wait
failed=0
for t in "${targets[@]}"; do
  cat "$logs/$t"
  if [ -n "$(find "artifacts/$t" -name 'crash-*' -o -name 'timeout-*' -o -name 'oom-*' 2>/dev/null)" ]; then
    echo "fuzz target $t found a failure: see fuzz/artifacts/$t/" >&2
    failed=1
  fi
done
exit $failed
