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
[ ${#targets[@]} -gt 0 ] || targets=(parse fmt_roundtrip query artifact host differential egress_wire)
if ! cargo fuzz --version >/dev/null 2>&1; then cargo install cargo-fuzz; fi
if ! rustup toolchain list | grep -q nightly; then rustup toolchain install nightly --profile minimal; fi

# Seed corpora (rebuilt each run; corpus/ is not committed).
mkdir -p corpus/parse corpus/fmt_roundtrip corpus/query corpus/artifact corpus/host corpus/differential corpus/egress_wire
for f in ../policies/*.policy ../policies/*/*.policy ../tests/data/*.policy ../tests/data/*/*.policy; do
  [ -f "$f" ] || continue
  name=$(echo "$f" | tr '/.' '__')
  cp "$f" "corpus/parse/$name"; cp "$f" "corpus/fmt_roundtrip/$name"
done
grep -h "^\s*expect" ../policies/*.policy ../tests/data/*.policy | sed -E 's/^\s*expect\s+\w+\s+//; s/\s+because\s+\w+\s*$//' \
  | awk 'NR <= 400' | split -l 1 - corpus/query/q_  # awk reads to the end: head would close the pipe (SIGPIPE under pipefail)
printf 'github.com\nGitHub.COM.\n127。0。0。1\n[::ffff:10.1.2.3]\n2130706433\nxn--bcher-kva.example\nbücher.example\n' | split -l 1 - corpus/host/h_
printf 'GATEHSE\0' > corpus/artifact/magic
# Heads, a response, authorities and a real ClientHello (Python's TLS) for egress_wire.
printf 'GET http://a.test:8080/x?y HTTP/1.1\r\nHost: a.test:8080\r\nContent-Length: 3\r\n\r\n' > corpus/egress_wire/get
printf 'CONNECT [::1]:443 HTTP/1.1\r\nHost: [::1]:443\r\n\r\n' > corpus/egress_wire/connect
printf 'POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n' > corpus/egress_wire/chunked
printf 'HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n' > corpus/egress_wire/response
printf 'api.github.com:443' > corpus/egress_wire/authority
python3 -c "
import ssl
c = ssl.create_default_context(); i, o = ssl.MemoryBIO(), ssl.MemoryBIO()
s = c.wrap_bio(i, o, server_hostname='github.com')
try: s.do_handshake()
except ssl.SSLWantReadError: pass
open('corpus/egress_wire/client_hello', 'wb').write(o.read())
"

declare -A ci_runs=([parse]=15000 [fmt_roundtrip]=15000 [query]=300000 [artifact]=3000000 [host]=500000 [differential]=30000 [egress_wire]=300000)
# The grammar's tokens, for the targets that read policy text.
declare -A dict=([parse]=-dict=policy.dict [fmt_roundtrip]=-dict=policy.dict)
for t in "${targets[@]}"; do
  if [ "$seconds" = ci ]; then
    echo "== fuzz $t: ${ci_runs[$t]} runs, seed 1"
    limit=(-seed=1 -runs="${ci_runs[$t]}")
  else
    echo "== fuzz $t for ${seconds}s"
    limit=(-max_total_time="$seconds")
  fi
  cargo +nightly fuzz run -s none "$t" "corpus/$t" -- "${limit[@]}" ${dict[$t]:-} -rss_limit_mb=2048 -timeout=10 2>&1 \
    | grep -E "^#[0-9]+.*DONE|Done [0-9]+ runs|ERROR|panicked|SUMMARY|stat::number_of_executed_units|crash-" || true
  if [ -n "$(find "artifacts/$t" -name 'crash-*' -o -name 'timeout-*' -o -name 'oom-*' 2>/dev/null)" ]; then
    echo "fuzz target $t found a failure: see fuzz/artifacts/$t/" >&2
    exit 1
  fi
done
