#!/usr/bin/env bash
# gatehouse-run and the policy's `apps` rules (issue 61; docs/run.md,
# "Programs"): a denied program from Debian's packages (nano) cannot be run,
# copied and run, run through a link or the dynamic loader, or found under
# another case of its name; an allowed one runs; a program denied while it
# runs is killed within a second, and so is one started after the change.
# As root and as an unprivileged caller (nobody). Real kernel, real nano.
#   BIN=target/release tests/run/apps.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
bin=${BIN:-$root/target/release}
case "$bin" in /*) ;; *) bin=$root/$bin ;; esac
run=$bin/gatehouse-run
[ -x "$run" ] && [ -x "$bin/gatehouse-egress" ] || { echo "build gatehouse-run and gatehouse-egress into $bin first" >&2; exit 1; }
nano=$(command -v nano) || { echo "nano is not installed (.ci/run installs it)" >&2; exit 1; }
# Everything under /var/tmp: readable by nobody, and not /tmp (where the
# launcher stages its covers for a moment).
work=$(mktemp -d /var/tmp/gh-apps.XXXXXX)
chmod 755 "$work"
trap 'rm -rf "$work"' EXIT
fail=0
ok() { echo "ok: $*"; }
bad() { echo "FAIL: $*"; fail=1; }

cat > "$work/deny.policy" <<'POLICY'
policy e2e {
  sandbox workspace-write
  approvals never
  network { default deny }
  apps { deny nano }
}
POLICY
chmod 644 "$work/deny.policy"

# What the command finds, one line a check.
cat > "$work/inside.sh" <<'INSIDE'
try() { name=$1; shift; out=$("$@" 2>&1); echo "$name exit=$? $(echo "$out" | head -1)"; }
try run nano --version
try path /usr/bin/nano --version
try merged-usr /bin/nano --version
try symlink rnano --version
try loader /lib64/ld-linux-x86-64.so.2 /usr/bin/nano --version
cp /usr/bin/nano ./mynano 2>/dev/null; chmod +x ./mynano 2>/dev/null
try copy ./mynano --version
try copy-bytes sh -c 'head -c 4 ./mynano | od -An -c | tr -d " "'
try case NANO --version
try allowed ls --version
INSIDE
chmod 755 "$work/inside.sh"

check_inside() {  # who, output
  local who=$1 out=$2
  echo "$out" | sed 's/^/    /'
  for c in run path merged-usr symlink loader copy; do
    line=$(echo "$out" | grep "^$c " || true)
    if [ -n "$line" ] && ! echo "$line" | grep -q "exit=0" && ! echo "$line" | grep -q "GNU nano"; then
      ok "$who: $c: refused ($(echo "$line" | cut -c1-90))"
    else
      bad "$who: $c: $line"
    fi
  done
  echo "$out" | grep "^run " | grep -q "is denied by the policy" \
    && ok "$who: the refusal says why" || bad "$who: no clear refusal"
  echo "$out" | grep "^copy-bytes " | grep -q 'ELF' \
    && bad "$who: the copy holds the program's bytes" || ok "$who: a copy holds the cover, not the program"
  echo "$out" | grep "^case " | grep -q "exit=127" && ok "$who: NANO: not found" || bad "$who: case: $(echo "$out" | grep '^case ')"
  echo "$out" | grep "^allowed " | grep -q "exit=0" && ok "$who: an allowed program runs" || bad "$who: ls: $(echo "$out" | grep '^allowed ')"
}

echo "== as $(id -un): nano denied"
mkdir -p "$work/ws" && chmod 777 "$work/ws"
out=$(cd "$work/ws" && "$run" "$work/deny.policy" --log "$work/log.jsonl" -- sh "$work/inside.sh" 2>"$work/err") || true
check_inside "$(id -un)" "$out"
grep -q '"query":"app /usr/bin/nano"' "$work/log.jsonl" && grep -q 'covered at launch' "$work/log.jsonl" \
  && ok "the decision log records the cover" || bad "no decision record: $(cat "$work/log.jsonl" 2>/dev/null | head -3)"
# The same command without the apps rule runs nano: the checks above can fail.
sed '/^  apps /d' "$work/deny.policy" > "$work/allow.policy"; chmod 644 "$work/allow.policy"
out=$(cd "$work/ws" && "$run" "$work/allow.policy" -- nano --version 2>&1 | head -1) || true
echo "$out" | grep -q "GNU nano" && ok "without the rule, nano runs ($out)" || bad "without the rule: $out"

if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null; then
  echo "== as nobody (a user namespace of its own): nano denied"
  mkdir -p "$work/nb" && chmod 777 "$work/nb"
  out=$(cd "$work/nb" && setpriv --reuid=65534 --regid=65534 --clear-groups env HOME=/nonexistent \
    "$run" "$work/deny.policy" -- sh "$work/inside.sh" 2>/dev/null) || true
  check_inside nobody "$out"
fi

live() {  # who, command prefix
  local who=$1; shift
  echo "== as $who: a program denied while it runs"
  sed '/^  apps /d' "$work/deny.policy" > "$work/live.policy"
  chmod 644 "$work/live.policy"
  mkdir -p "$work/live-$who" && chmod 777 "$work/live-$who"
  local t0 t1
  (cd "$work/live-$who" && "$@" "$run" "$work/live.policy" -- \
    sh -c 'sleep 67; echo "first=$?"; sleep 67; echo "second=$?"' > "$work/live-$who.out" 2>"$work/live-$who.err") &
  local launcher=$!
  for _ in $(seq 100); do pgrep -f '^sleep 67$' >/dev/null && break; sleep 0.05; done
  sleep 0.3
  t0=$(date +%s%N)
  sed -i 's/^  network { default deny }$/  network { default deny }\n  apps { deny sleep }/' "$work/live.policy"
  # The first kill shows as `first=137` (sh reports the signal).
  for _ in $(seq 500); do grep -q '^first=' "$work/live-$who.out" 2>/dev/null && break; sleep 0.01; done
  t1=$(date +%s%N)
  local ms=$(( (t1 - t0) / 1000000 ))
  for _ in $(seq 500); do kill -0 "$launcher" 2>/dev/null || break; sleep 0.01; done
  local got
  got=$(tr '\n' ' ' < "$work/live-$who.out")
  if [ "$got" = "first=137 second=137 " ] && [ "$ms" -lt 1000 ]; then
    ok "$who: the running sleep was killed ${ms} ms after the change, and the one started after it too"
  else
    bad "$who: got '$got' after ${ms} ms; stderr: $(cat "$work/live-$who.err")"
    pkill -f '^sleep 67$' || true
  fi
  grep -q "killed process" "$work/live-$who.err" && ok "$who: the kill is said on stderr" || bad "$who: no kill message"
}
live "$(id -un)" env
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null; then
  live nobody setpriv --reuid=65534 --regid=65534 --clear-groups env HOME=/nonexistent
fi

if [ "$fail" != 0 ]; then echo "stderr of the first run:"; cat "$work/err"; exit 1; fi
echo "gatehouse-run apps: all checks hold"
