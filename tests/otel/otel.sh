#!/usr/bin/env bash
# OpenTelemetry export, end to end, against a real OTLP receiver built on the
# official protocol definitions (tests/otel/receiver.py: PyPI
# opentelemetry-proto, grpcio). Drives `policyc eval` (OTLP/HTTP, then gRPC
# with command lines on) and `gatehouse-egress` (gRPC, stopped by SIGTERM),
# and checks that every decision arrived once with its attributes, that the
# metric sums equal the requests made, and that a command line is absent
# unless enabled. Needs release binaries: BIN=target/release (policyc built
# with --features otel). Loopback only; bounded.
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=${BIN:-target/release}
BINABS=$(cd "$BIN" && pwd)
# The receiver's packages, from PyPI, in a venv of their own.
venv=$PWD/target/otel-venv
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c "import grpc, opentelemetry.proto" 2>/dev/null; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet -r tests/otel/requirements.txt
fi
work=$(mktemp -d /tmp/gatehouse-otel-XXXXXX)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; ip link del ghotel-a 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
GRPC=$(free_port); HTTP=$(free_port); PROXY=$(free_port)
out=$work/received.jsonl
"$venv/bin/python" tests/otel/receiver.py --grpc "$GRPC" --http "$HTTP" --out "$out" > "$work/receiver.log" 2>&1 &
pids+=($!)
for _ in $(seq 50); do grep -q ready "$work/receiver.log" 2>/dev/null && break; sleep 0.1; done
grep -q ready "$work/receiver.log" || { cat "$work/receiver.log"; exit 1; }

# 1. policyc eval over OTLP/HTTP: 40 queries of 4 kinds, command lines off.
queries=$work/queries.txt
for i in $(seq 10); do
  echo "connect github.com:443"
  echo "dns exfil$i.attacker.example"
  echo "exec git push origin secret-branch-$i"
  echo "mcp github/delete_repo destructive=true"
done > "$queries"
OTEL_SERVICE_NAME=eval-http "$BIN/policyc" eval tests/data/spec-agent.policy --policy coding-agent \
  --queries "$queries" --otel-exporter otlp-http --otel-endpoint "http://127.0.0.1:$HTTP" > "$work/eval1.jsonl"
# 2. the same over gRPC with the standard variables, command lines on.
OTEL_SERVICE_NAME=eval-grpc OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:$GRPC" OTEL_EXPORTER_OTLP_PROTOCOL=grpc \
  "$BIN/policyc" eval tests/data/spec-agent.policy --policy coding-agent \
  --queries "$queries" --otel-log-commands > "$work/eval2.jsonl"

# 2a. the same over OTLP/HTTP JSON.
OTEL_SERVICE_NAME=eval-json OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:$HTTP" OTEL_EXPORTER_OTLP_PROTOCOL=http/json \
  "$BIN/policyc" eval tests/data/spec-agent.policy --policy coding-agent --queries "$queries" > /dev/null

# 2b. a stream of 20 000 decisions, more than twice the queue: all arrive.
python3 -c 'for i in range(20000): print(f"dns n{i}.example")' > "$work/stream.txt"
OTEL_SERVICE_NAME=eval-stream "$BIN/policyc" eval tests/data/spec-agent.policy --policy coding-agent \
  --queries "$work/stream.txt" --otel-exporter otlp-grpc --otel-endpoint "http://127.0.0.1:$GRPC" > /dev/null

# 3. the proxy over gRPC: 8 allowed and 12 denied requests, then SIGTERM
# with events queued (the metric interval is long: only the flush sends them).
cat > "$work/egress.policy" <<'P'
policy egress {
  network {
    default deny
    local deny
    allow domain allowed.test
  }
}
P
cat > "$work/otel.toml" <<T
exporter = "otlp-grpc"
endpoint = "http://127.0.0.1:$GRPC"
environment = "ci"
service_name = "egress-ci"
metric_interval_ms = 600000
T
"$BIN/gatehouse-egress" --policy "$work/egress.policy" --http "127.0.0.1:$PROXY" \
  --upstream-dns 127.0.0.1:9 --otel "$work/otel.toml" > "$work/egress.out" 2> "$work/egress.err" &
egress=$!
pids+=($egress)
for _ in $(seq 50); do grep -q "http proxy on" "$work/egress.err" 2>/dev/null && break; sleep 0.1; done
{ for i in $(seq 8); do echo "http://allowed.test/$i"; done
  for i in $(seq 12); do echo "http://denied$i.test/x"; done; } |
  xargs -P 20 -I{} curl -s -o /dev/null --max-time 10 -x "http://127.0.0.1:$PROXY" {} || true
kill -TERM "$egress"
wait "$egress" || { echo "gatehouse-egress exited $? on SIGTERM"; cat "$work/egress.err"; exit 1; }

# 3b. the proxy over OTLP/HTTP JSON: 3 requests, their decisions and spans;
# the first in a caller's sampled trace (its span a child there), the third
# in a trace the caller does not sample (no span).
PORT=$(free_port)
OTEL_SERVICE_NAME=egress-json OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:$HTTP" OTEL_EXPORTER_OTLP_PROTOCOL=http/json \
  "$BIN/gatehouse-egress" --policy "$work/egress.policy" --http "127.0.0.1:$PORT" --upstream-dns 127.0.0.1:9 \
  > /dev/null 2> "$work/egress-json.err" &
p=$!
pids+=($p)
for _ in $(seq 50); do grep -q "http proxy on" "$work/egress-json.err" 2>/dev/null && break; sleep 0.1; done
curl -s -o /dev/null --max-time 5 -x "http://127.0.0.1:$PORT" "http://denied.test/a" \
  -H "traceparent: 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01" || true
curl -s -o /dev/null --max-time 5 -x "http://127.0.0.1:$PORT" "http://denied.test/b" || true
curl -s -o /dev/null --max-time 5 -x "http://127.0.0.1:$PORT" "http://denied.test/c" \
  -H "traceparent: 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00" || true
kill -TERM "$p"; wait "$p" || { echo "gatehouse-egress (json) exited $? on SIGTERM"; cat "$work/egress-json.err"; exit 1; }

# 3b'. a collector without a traces pipeline (no trace service): the
# decisions still arrive; the spans are counted as not delivered.
NT_GRPC=$(free_port); NT_HTTP=$(free_port)
"$venv/bin/python" tests/otel/receiver.py --grpc "$NT_GRPC" --http "$NT_HTTP" --out "$out" --no-traces > "$work/receiver-nt.log" 2>&1 &
pids+=($!)
for _ in $(seq 50); do grep -q ready "$work/receiver-nt.log" 2>/dev/null && break; sleep 0.1; done
PORT=$(free_port)
OTEL_SERVICE_NAME=egress-no-traces "$BIN/gatehouse-egress" --policy "$work/egress.policy" --http "127.0.0.1:$PORT" \
  --upstream-dns 127.0.0.1:9 --otel-exporter otlp-grpc --otel-endpoint "http://127.0.0.1:$NT_GRPC" \
  > /dev/null 2> "$work/egress-nt.err" &
p=$!
pids+=($p)
for _ in $(seq 50); do grep -q "http proxy on" "$work/egress-nt.err" 2>/dev/null && break; sleep 0.1; done
for i in 1 2 3; do
  curl -s -o /dev/null --max-time 5 -x "http://127.0.0.1:$PORT" "http://denied.test/nt$i" || true
  sleep 0.3
done
kill -TERM "$p"; wait "$p" || { echo "gatehouse-egress (no traces) exited $? on SIGTERM"; cat "$work/egress-nt.err"; exit 1; }
grep -q "telemetry: 3 records (decision events and spans) were not delivered" "$work/egress-nt.err" ||
  { echo "FAIL egress (no traces): the 3 spans were not counted as not delivered"; cat "$work/egress-nt.err"; exit 1; }

# 3b''. the sampler, the ecosystem's way: OTEL_TRACES_SAMPLER=
# parentbased_always_off records a span only under a caller that samples
# its trace; every decision is still sent. An unknown sampler stops the
# daemon at start with the reason.
PORT=$(free_port)
OTEL_SERVICE_NAME=egress-sampled OTEL_TRACES_SAMPLER=parentbased_always_off \
  OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:$GRPC" OTEL_EXPORTER_OTLP_PROTOCOL=grpc \
  "$BIN/gatehouse-egress" --policy "$work/egress.policy" --http "127.0.0.1:$PORT" --upstream-dns 127.0.0.1:9 \
  > /dev/null 2> "$work/egress-sampled.err" &
p=$!
pids+=($p)
for _ in $(seq 50); do grep -q "http proxy on" "$work/egress-sampled.err" 2>/dev/null && break; sleep 0.1; done
curl -s -o /dev/null --max-time 5 -x "http://127.0.0.1:$PORT" "http://denied.test/s1" \
  -H "traceparent: 00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01" || true
curl -s -o /dev/null --max-time 5 -x "http://127.0.0.1:$PORT" "http://denied.test/s2" || true
curl -s -o /dev/null --max-time 5 -x "http://127.0.0.1:$PORT" "http://denied.test/s3" \
  -H "traceparent: 00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00" || true
kill -TERM "$p"; wait "$p" || { echo "gatehouse-egress (sampled) exited $? on SIGTERM"; cat "$work/egress-sampled.err"; exit 1; }
code=0
OTEL_TRACES_SAMPLER=sometimes OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:$GRPC" \
  timeout 10 "$BIN/gatehouse-egress" --policy "$work/egress.policy" --http 127.0.0.1:0 > /dev/null 2> "$work/egress-badsampler.err" || code=$?
[ "$code" = 2 ] && grep -q "traces sampler \`sometimes\` is not known" "$work/egress-badsampler.err" ||
  { echo "FAIL an unknown OTEL_TRACES_SAMPLER did not stop the daemon with the reason (exit $code)"; cat "$work/egress-badsampler.err"; exit 1; }

# 3c. the adapters: squid's helper and srt's decider, their decisions
# flushed when the peer closes the link; a helper stopped by SIGTERM
# flushes too (exit 143).
GRPCURL="http://127.0.0.1:$GRPC"
printf '0 allowed.test 443 CONNECT\n1 denied.test 443 CONNECT\n2 denied.test 80 GET\n' |
  OTEL_SERVICE_NAME=squid-ci "$BIN/gatehouse-egress" squid-helper --policy "$work/egress.policy" \
    --otel-exporter otlp-grpc --otel-endpoint "$GRPCURL" > "$work/squid.out" 2> "$work/squid.err"
python3 -c 'import struct, sys
for m in (b"{\"t\":\"hello\",\"proto\":1}",
          b"{\"t\":\"req\",\"id\":1,\"method\":\"GET\",\"host\":\"denied.test\",\"port\":443,\"sni\":\"denied.test\",\"path\":\"/\"}"):
    sys.stdout.buffer.write(struct.pack(">I", len(m)) + m)' |
  OTEL_SERVICE_NAME=srt-ci "$BIN/gatehouse-egress" srt-decider --policy "$work/egress.policy" \
    --otel-exporter otlp-grpc --otel-endpoint "$GRPCURL" > "$work/srt.out" 2> "$work/srt.err"
mkfifo "$work/helper.in"
exec 7<>"$work/helper.in"
OTEL_SERVICE_NAME=squid-term "$BIN/gatehouse-egress" squid-helper --policy "$work/egress.policy" \
  --otel-exporter otlp-grpc --otel-endpoint "$GRPCURL" <&7 > "$work/squid-term.out" 2>/dev/null &
p=$!
echo "5 evil.test 80 GET" >&7
for _ in $(seq 50); do grep -q "^5 " "$work/squid-term.out" 2>/dev/null && break; sleep 0.1; done
kill -TERM "$p"
code=0; wait "$p" || code=$?
exec 7>&-
[ "$code" = 143 ] || { echo "FAIL squid-helper exited $code on SIGTERM (expected 143)"; exit 1; }

# 3d. gatehouse-run: the proxy it starts exports with the variables it
# inherits, and is stopped with SIGTERM, so a run's decisions are flushed.
mkdir -p "$work/ws"
( cd "$work/ws" && OTEL_SERVICE_NAME=run-ci OTEL_EXPORTER_OTLP_ENDPOINT="$GRPCURL" OTEL_EXPORTER_OTLP_PROTOCOL=grpc \
  "$BINABS/gatehouse-run" "$work/egress.policy" -- curl -s -o /dev/null --max-time 5 http://denied.test/run ) 2> "$work/run.err" ||
  { echo "FAIL gatehouse-run"; cat "$work/run.err"; exit 1; }

# 4. `policyc import zerocode --telemetry` on the seed's [otel] examples:
# settings the daemon accepts, with no token in them. The gRPC example's
# collector is moved to the local receiver (nothing leaves the machine); its
# literal header comes from the variable the import names.
for f in zc-otel zc-otel-exporter zc-otel-grpc; do
  "$BIN/policyc" import zerocode "tests/data/import/$f.toml" --telemetry "$work/$f.otel.toml" > /dev/null 2> "$work/$f.import.err"
done
if grep -l "abc123" "$work"/*.otel.toml; then echo "FAIL a header token was copied into the settings"; exit 1; fi
grep -q '"${OTLP_TOKEN}"' "$work/zc-otel-exporter.otel.toml" || { echo "FAIL the \${OTLP_TOKEN} reference was not kept"; exit 1; }
sed -i "s#https://otel.example.com:4317#http://127.0.0.1:$GRPC#" "$work/zc-otel-grpc.otel.toml"
for f in zc-otel zc-otel-grpc; do
  PORT=$(free_port)
  OTEL_SERVICE_NAME="import-$f" GATEHOUSE_OTEL_HEADER_X_OTLP_META=abc123 \
    "$BIN/gatehouse-egress" --policy "$work/egress.policy" --http "127.0.0.1:$PORT" \
    --upstream-dns 127.0.0.1:9 --otel "$work/$f.otel.toml" > /dev/null 2> "$work/$f.egress.err" &
  p=$!
  for _ in $(seq 50); do grep -q "http proxy on" "$work/$f.egress.err" 2>/dev/null && break; sleep 0.1; done
  grep -q "http proxy on" "$work/$f.egress.err" || { echo "FAIL gatehouse-egress refused the imported $f settings"; cat "$work/$f.egress.err"; exit 1; }
  curl -s -o /dev/null --max-time 5 -x "http://127.0.0.1:$PORT" "http://denied.test/" || true
  kill -TERM "$p"; wait "$p"
done

# 5. host mode: a sandbox's DNS question, decided with its policy, carries
# its id. The sandbox address sits on a veth pair in this namespace (root).
printf 'networks = ["10.203.0.0/24"]\n\n[[sandbox]]\nid = "ci-7"\naddresses = ["10.203.0.2"]\npolicy = "egress.policy"\n' > "$work/sandboxes.toml"
ip link del ghotel-a 2>/dev/null || true
ip link add ghotel-a type veth peer name ghotel-b
ip link set ghotel-a up; ip link set ghotel-b up
ip addr add 10.203.0.1/24 dev ghotel-a; ip addr add 10.203.0.2/24 dev ghotel-b
DNSPORT=$(free_port)
OTEL_SERVICE_NAME=host-ci "$BIN/gatehouse-egress" host --sandboxes "$work/sandboxes.toml" --no-nftables \
  --transparent-port 0 --dns-port "$DNSPORT" --upstream-dns 127.0.0.1:9 \
  --otel-exporter otlp-grpc --otel-endpoint "http://127.0.0.1:$GRPC" > /dev/null 2> "$work/host.err" &
hostp=$!
for _ in $(seq 50); do grep -q "host mode for" "$work/host.err" 2>/dev/null && break; sleep 0.1; done
python3 - "$DNSPORT" <<'DNS'
import socket, struct, sys
q = struct.pack(">HHHHHH", 0x1234, 0x0100, 1, 0, 0, 0) + b"".join(
    bytes([len(p)]) + p.encode() for p in "exfil.attacker.example".split(".")) + b"\x00" + struct.pack(">HH", 1, 1)
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("10.203.0.2", 0)); s.settimeout(1)
s.sendto(q, ("10.203.0.1", int(sys.argv[1])))
try:
    s.recvfrom(512)
except OSError:
    pass
DNS
kill -TERM "$hostp"; wait "$hostp" || { echo "host mode exited $? on SIGTERM"; cat "$work/host.err"; exit 1; }

python3 - "$out" "$BINABS" <<'PY'
import collections, json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
logs = collections.defaultdict(list)
for r in rows:
    svc = r["resource"].get("service.name")
    if r["signal"] == "log":
        logs[svc].append(r)
last = {}
for r in rows:
    if r["signal"] == "metric" and r["name"] == "gatehouse.decisions":
        last[(r["resource"]["service.name"], json.dumps(r["attributes"], sort_keys=True))] = r["value"]
metric_sum = collections.Counter()
for (svc, _), v in last.items():
    metric_sum[svc] += v
fails = []
passes = []
def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    (passes if cond else fails).append(what)
for svc, transport in (("eval-http", "http"), ("eval-grpc", "grpc"), ("eval-json", "http/json")):
    got = logs[svc]
    check(len(got) == 40, f"{svc}: 40 decision events arrived once each (got {len(got)})")
    check(all(r["transport"] == transport and r["event_name"] == "gatehouse.decision" for r in got), f"{svc}: over {transport}, named gatehouse.decision")
    check(metric_sum[svc] == 40, f"{svc}: gatehouse.decisions sums to 40 (got {metric_sum[svc]})")
    dns = sorted(r["attributes"].get("dns.question.name", "") for r in got if r["attributes"]["gatehouse.query.kind"] == "dns")
    check(dns == sorted(f"exfil{i}.attacker.example" for i in range(1, 11)), f"{svc}: each dns name once")
    conn = [r for r in got if r["attributes"]["gatehouse.query.kind"] == "connect"]
    check(all(r["attributes"].get("server.address") == "github.com" and r["attributes"].get("server.port") == 443
              and r["attributes"]["gatehouse.decision"] == "allow" and r["attributes"].get("gatehouse.rule", "").endswith(":11:5") for r in conn),
          f"{svc}: connect events carry server.address, server.port, the decision and the rule")
    mcp = [r for r in got if r["attributes"]["gatehouse.query.kind"] == "mcp"]
    check(all(r["attributes"].get("gen_ai.tool.name") == "delete_repo" and r["attributes"].get("gatehouse.escalation") == "user" for r in mcp),
          f"{svc}: mcp events carry the tool and the escalation")
text = json.dumps(logs["eval-http"])
check("secret-branch" not in text and "process.command_line" not in text, "eval-http: no command line without --otel-log-commands")
lines = [r["attributes"].get("process.command_line") for r in logs["eval-grpc"] if r["attributes"]["gatehouse.query.kind"] == "exec"]
check(len(lines) == 10 and all(l and l.startswith("git ") for l in lines), "eval-grpc: command lines with --otel-log-commands (masked as the policy says)")
eg = logs["egress-ci"]
allowed = [r for r in eg if r["attributes"].get("server.address") == "allowed.test"]
denied = [r for r in eg if r["attributes"]["gatehouse.decision"] == "deny"]
check(len(eg) == 20 and len(allowed) == 8 and len(denied) == 12, f"egress: 20 decisions after SIGTERM (8 allowed, 12 denied; got {len(eg)}, {len(allowed)}, {len(denied)})")
check(all(r["resource"].get("deployment.environment.name") == "ci" for r in eg), "egress: the environment label on everything")
check(metric_sum["egress-ci"] == 20, f"egress: gatehouse.decisions sums to 20 (got {metric_sum['egress-ci']})")
reqs = {json.dumps(r["attributes"]): r["value"] for r in rows if r["signal"] == "metric" and r["name"] == "gatehouse.egress.requests" and r["resource"]["service.name"] == "egress-ci"}
check(reqs.get(json.dumps({"gatehouse.request.kind": "http"})) == 20, f"egress: gatehouse.egress.requests http = 20 (got {reqs})")
stream = logs["eval-stream"]
check(len(stream) == 20000 and len({r["attributes"]["dns.question.name"] for r in stream}) == 20000,
      f"eval-stream: all 20000 decisions of a stream larger than the queue arrived once (got {len(stream)})")
host = logs["host-ci"]
check(len(host) == 1 and host[0]["attributes"].get("gatehouse.sandbox") == "ci-7"
      and host[0]["attributes"].get("dns.question.name", "").startswith("exfil.attacker.example")
      and host[0]["attributes"]["gatehouse.decision"] == "deny",
      f"host mode: the sandbox's decision carries gatehouse.sandbox (got {[r['attributes'] for r in host]})")
spans = collections.defaultdict(list)
for r in rows:
    if r["signal"] == "span":
        spans[r["resource"].get("service.name")].append(r)
es = spans["egress-ci"]
check(len(es) == 20 and len({s["trace_id"] for s in es}) == 20
      and all(s["name"] == "gatehouse.egress.request" and s["kind"] == 2 and s["end"] >= s["start"] for s in es),
      f"egress: one span per request, each its own trace, kind SERVER (got {len(es)})")
denied_spans = [s for s in es if "not_allowed" in s["attributes"].get("gatehouse.outcome", "")]
check(len(denied_spans) == 12 and all(s["status"] == 2 for s in denied_spans),
      "egress: refused requests' spans carry the outcome and status ERROR")
check(all("gatehouse.request" not in s["attributes"] for s in es),
      "egress: no request line on spans without the command-line setting")
hs = spans["host-ci"]
check(len(hs) == 1 and hs[0]["attributes"].get("gatehouse.sandbox") == "ci-7",
      f"host mode: the DNS answer's span carries gatehouse.sandbox (got {[s['attributes'] for s in hs]})")
ej = logs["egress-json"]
ejs = spans["egress-json"]
check(len(ej) == 3 and all(r["transport"] == "http/json" and r["attributes"]["gatehouse.decision"] == "deny" for r in ej)
      and len(ejs) == 2 and all(s["transport"] == "http/json" and s["status"] == 2 and len(s["trace_id"]) == 32 for s in ejs),
      f"egress over OTLP/HTTP JSON: 3 decisions and 2 spans (got {len(ej)}, {len(ejs)})")
child = [s for s in ejs if s["trace_id"] == "4bf92f3577b34da6a3ce929d0e0e4736"]
check(len(child) == 1 and child[0]["parent"] == "00f067aa0ba902b7"
      and [s["parent"] for s in ejs if s not in child] == [""],
      f"egress: a request's traceparent puts its span in the caller's trace; unsampled, none (got {[(s['trace_id'], s['parent']) for s in ejs]})")
spans_by_id = {(s["trace_id"], s["span_id"]) for s in ejs}
joined = [r for r in ej if (r["trace_id"], r["span_id"]) in spans_by_id]
check(len(joined) == 2 and any(r["trace_id"] == "4bf92f3577b34da6a3ce929d0e0e4736" for r in joined)
      and all(r["span_id"] == "" for r in ej if r not in joined),
      f"egress: each decision carries its request's trace and span ids (none in an unsampled trace; got {[(r['trace_id'], r['span_id']) for r in ej]})")
eg_spans = {(s["trace_id"], s["span_id"]) for s in spans["egress-ci"]}
check(all((r["trace_id"], r["span_id"]) in eg_spans for r in logs["egress-ci"]),
      "egress: over gRPC too, every decision joins its request's span")
nt = logs["egress-no-traces"]
check(len(nt) == 3 and not spans["egress-no-traces"],
      f"a collector without traces still gets every decision (got {len(nt)})")
ss, sss = logs["egress-sampled"], spans["egress-sampled"]
check(len(ss) == 3 and len(sss) == 1 and sss[0]["trace_id"] == "0af7651916cd43dd8448eb211c80319c"
      and sss[0]["parent"] == "b7ad6b7169203331"
      and [r["trace_id"] for r in ss].count("0af7651916cd43dd8448eb211c80319c") == 1,
      f"OTEL_TRACES_SAMPLER=parentbased_always_off: a span only under a sampling caller, every decision sent (got {len(ss)} decisions, {len(sss)} spans)")
sq = logs["squid-ci"]
check(len(sq) == 3 and sorted(r["attributes"]["gatehouse.decision"] for r in sq) == ["allow", "deny", "deny"]
      and all(r["attributes"].get("server.address") in ("allowed.test", "denied.test") for r in sq),
      f"squid-helper: its 3 decisions, flushed when squid closes the link (got {len(sq)})")
st = logs["squid-term"]
check(len(st) == 1 and st[0]["attributes"].get("server.address") == "evil.test",
      f"squid-helper: SIGTERM flushes what is queued (got {len(st)})")
sr = logs["srt-ci"]
check(len(sr) >= 1 and all(r["attributes"]["gatehouse.decision"] == "deny" for r in sr)
      and any(r["attributes"].get("server.address") == "denied.test" for r in sr),
      f"srt-decider: its decisions arrive (got {[r['attributes'].get('server.address') for r in sr]})")
rn = logs["run-ci"]
check(len(rn) == 1 and rn[0]["attributes"].get("server.address") == "denied.test" and rn[0]["attributes"]["gatehouse.decision"] == "deny",
      f"gatehouse-run: the run's decision arrives, flushed when the run ends (got {len(rn)})")
imp = logs["import-zc-otel-grpc"]
check(len(imp) == 1 and imp[0]["headers"].get("x-otlp-meta") == "abc123",
      "import: the daemon runs the imported gRPC settings, its header from the variable the import named")
check(not logs["import-zc-otel"], "import: exporter = none sends nothing")
# The shipped build never reads the experiments' switch (otel/src/leave_out.rs).
shipped = [f"{sys.argv[2]}/{b}" for b in ("gatehouse-egress", "policyc", "gatehouse-run")]
check(all(b"GATEHOUSE_OTEL_LEAVE_OUT" not in open(b, "rb").read() for b in shipped),
      "the shipped binaries never read GATEHOUSE_OTEL_LEAVE_OUT (no part of the export can be switched off)")
print(f"otel: {len(passes)} passed, {len(fails)} failed")
sys.exit(1 if fails else 0)
PY
