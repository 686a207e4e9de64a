#!/usr/bin/env bash
# gatehouse-run end to end (docs/run.md): the real kernel (Landlock, user,
# network and mount namespaces), the real gatehouse-egress and curl, a
# loopback HTTP server. Every check is made from inside the command.
#   BIN=target/release tests/run/run.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
bin=${BIN:-$root/target/release}
case "$bin" in /*) ;; *) bin=$root/$bin ;; esac
run=$bin/gatehouse-run
[ -x "$run" ] && [ -x "$bin/gatehouse-egress" ] || { echo "build gatehouse-run and gatehouse-egress into $bin first" >&2; exit 1; }

work=$(mktemp -d /tmp/gh-run-e2e.XXXXXX)
server=
cleanup() { [ -n "$server" ] && kill "$server" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT

# A loopback server the policy allows, on a free port.
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
mkdir -p "$work/site" && echo hello > "$work/site/index.html"
python3 -m http.server "$port" --bind 127.0.0.1 --directory "$work/site" >/dev/null 2>&1 &
server=$!
for _ in $(seq 50); do curl -s -o /dev/null "http://127.0.0.1:$port/" && break; sleep 0.1; done

ws=$work/ws
mkdir -p "$ws/src" "$ws/.git" "$ws/.github/workflows" "$ws/secrets"
echo key > "$ws/secrets/prod.key"
echo lock > "$ws/Cargo.lock"
echo '[core]' > "$ws/.git/config"
# A nested repository (a submodule, a vendored repo): its hooks and config
# are protected, the rest of its .git stays writable.
mkdir -p "$ws/vendor/lib/.git/hooks" "$ws/vendor/lib/.git/objects"
echo '#!/bin/sh' > "$ws/vendor/lib/.git/hooks/pre-commit"
echo '[core]' > "$ws/vendor/lib/.git/config"
cat > "$work/policy.policy" <<POLICY
policy e2e {
  sandbox workspace-write {
    exclude "/tmp"
    none "secrets"
    read "**/*.lock"
    protect ".github"
  }
  approvals never
  network {
    default deny
    allow ip 127.0.0.1 port $port
  }
}
POLICY

# What the command finds, one line a check: NAME ok | NAME failed: ERROR.
cat > "$work/inside.sh" <<'INSIDE'
try() { name=$1; shift; if out=$("$@" 2>&1); then echo "$name ok"; else echo "$name failed: $out" | head -1; fi; }
try write-workspace sh -c 'echo x > src/new.rs'
try write-workspace-root sh -c 'echo x > NOTES.md'
try write-git sh -c 'echo x >> .git/config'
try write-protected-name sh -c 'echo x > .github/workflows/ci.yml'
try write-nested-hook sh -c 'echo x >> vendor/lib/.git/hooks/pre-commit'
try create-nested-hook sh -c 'echo x > vendor/lib/.git/hooks/post-checkout'
try write-nested-config sh -c 'echo x >> vendor/lib/.git/config'
try write-nested-objects sh -c 'echo x > vendor/lib/.git/objects/new'
try write-protected-glob sh -c 'echo x >> Cargo.lock'
try create-protected-name sh -c 'echo x > .agents'
try create-beneath-protected-name sh -c 'mkdir -p .zerocode/x'
try write-outside sh -c "echo x > $OUTSIDE/outside.txt"
try write-etc sh -c 'echo x > /etc/gatehouse-run-test'
try read-none cat secrets/prod.key
try read-workspace cat Cargo.lock
try read-etc cat /etc/hostname
try list-workspace ls
echo "curl-allowed $(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PORT/")"
echo "curl-denied $(curl -s -o /dev/null -w '%{http_code} %header{x-gatehouse-reason}' http://example.com/)"
try direct-tcp curl -s -m 3 --noproxy '*' "http://127.0.0.1:$PORT/"
try direct-remote curl -s -m 3 --noproxy '*' http://1.1.1.1/
try direct-udp python3 -c 'import socket; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.sendto(b"x", ("1.1.1.1", 53))'
echo "proxy-env $HTTPS_PROXY"
exit 3
INSIDE

fail=0
expect() {  # expect NAME PATTERN (an extended regular expression)
  local line
  line=$(grep -E "^$1 " "$work/out" || true)
  if echo "$line" | grep -Eq "^$1 $2"; then echo "ok: $line"; else echo "FAIL: $1: expected /$2/, got: ${line:-nothing}"; fail=1; fi
}

echo "== refused without --allow-weaker: a glob Landlock cannot match"
set +e
(cd "$ws" && "$run" "$work/policy.policy" -- true) 2> "$work/refused"
code=$?
set -e
if [ "$code" = 125 ] && grep -q '\*\*/\*.lock' "$work/refused"; then echo "ok: exit 125, naming the rule"; else echo "FAIL: refusal: exit $code"; cat "$work/refused"; fail=1; fi

echo "== a proxy that stops at start is named as the cause, not as a timeout"
set +e
(cd "$ws" && "$run" --egress /bin/false "$work/policy.policy" --allow-weaker -- true) 2> "$work/stopped"
code=$?
set -e
if [ "$code" = 125 ] && grep -q 'stopped at start' "$work/stopped"; then echo "ok: exit 125, the proxy's own stop named"; else echo "FAIL: a proxy that stopped: exit $code"; cat "$work/stopped"; fail=1; fi

echo "== the proxy stops on the SIGTERM it is sent when the command ends"
# The launcher blocks SIGTERM for itself; a proxy that inherited the mask
# never saw it and was killed 6 s later, its records unwritten.
start=$(date +%s%N)
(cd "$ws" && "$run" "$work/policy.policy" --allow-weaker -- true) 2> "$work/ended"
took=$(( ($(date +%s%N) - start) / 1000000 ))
if [ "$took" -lt 3000 ] && ! grep -q 'did not stop' "$work/ended"; then echo "ok: ended in ${took} ms"; else echo "FAIL: the run of true took ${took} ms"; cat "$work/ended"; fail=1; fi

echo "== the command under the policy"
mkdir -p "$work/outside"
set +e
(cd "$ws" && OUTSIDE=$work/outside PORT=$port "$run" "$work/policy.policy" --allow-weaker --log "$work/decisions.jsonl" -- sh "$work/inside.sh") > "$work/out" 2> "$work/err"
code=$?
set -e
cat "$work/out"
[ "$code" = 3 ] && echo "ok: the command's exit status (3) passed through" || { echo "FAIL: exit status $code"; cat "$work/err"; fail=1; }
expect write-workspace 'ok'
expect write-workspace-root 'ok'
expect write-git 'failed: .*(Read-only file system|Permission denied)'
expect write-protected-name 'failed: .*(Read-only file system|Permission denied)'
expect write-nested-hook 'failed: .*(Read-only file system|Permission denied)'
expect create-nested-hook 'failed: .*(Read-only file system|Permission denied)'
expect write-nested-config 'failed: .*(Read-only file system|Permission denied)'
expect write-nested-objects 'ok'
expect write-protected-glob 'failed: .*(Read-only file system|Permission denied)'
expect create-protected-name 'failed: .*(Read-only file system|Permission denied)'
expect create-beneath-protected-name 'failed'
expect write-outside 'failed: .*Permission denied'
expect write-etc 'failed: .*Permission denied'
expect read-none 'failed: .*(No such file|Permission denied)'
expect read-workspace 'ok'
expect read-etc 'ok'
expect list-workspace 'ok'
expect curl-allowed '200'
expect curl-denied '403 not_allowed'
expect direct-tcp 'failed'
expect direct-remote 'failed'
expect direct-udp 'failed'
expect proxy-env 'http://127\.0\.0\.1:3128'
# The files outside are as they were.
[ ! -e "$work/outside/outside.txt" ] && [ ! -e "$ws/.agents" ] && [ ! -e "$ws/.zerocode" ] && [ "$(cat "$ws/.git/config")" = '[core]' ] && [ "$(cat "$ws/secrets/prod.key")" = key ] \
  && echo "ok: nothing outside the rules changed (the run's placeholders for .agents and .zerocode are gone)" || { echo "FAIL: a file changed"; fail=1; }
# The network decisions are logged.
if grep -q '"not_allowed"\|refused: not_allowed' "$work/decisions.jsonl"; then echo "ok: the denial is in the decision log"; else echo "FAIL: no denial in the log"; cat "$work/decisions.jsonl"; fail=1; fi

echo "== two runs in one workspace: the first to end leaves the other's blocks in place"
# A makes the placeholders for .agents and .zerocode; B starts while they
# are there (to B they are existing files, bound read-only); A ends first;
# then B tries the protected names.
w2=$work/ws2 && mkdir -p "$w2/src"
(cd "$w2" && "$run" "$work/policy.policy" --allow-weaker -- sh -c '
  touch src/a-started
  for _ in $(seq 100); do [ -e src/b-started ] && break; sleep 0.1; done') 2>/dev/null &
a=$!
for _ in $(seq 100); do [ -e "$w2/src/a-started" ] && break; sleep 0.1; done
(cd "$w2" && "$run" "$work/policy.policy" --allow-weaker -- sh -c '
  touch src/b-started
  for _ in $(seq 100); do [ -e src/a-done ] && break; sleep 0.1; done
  [ -e src/a-done ] || echo "a-never-ended"
  mkdir -p .zerocode/x 2>/dev/null && echo "zerocode-created" || echo "zerocode-blocked"
  echo x > .agents 2>/dev/null && echo "agents-written" || echo "agents-blocked"') > "$work/b.out" 2> "$work/b.err" &
b=$!
wait "$a" || { echo "FAIL: run A"; fail=1; }
touch "$w2/src/a-done"
wait "$b" || true
if [ "$(echo $(cat "$work/b.out"))" = "zerocode-blocked agents-blocked" ] && [ ! -e "$w2/.zerocode" ] && [ ! -e "$w2/.agents" ]; then
  echo "ok: run B's blocks held after run A ended, and the placeholders went with the last run"
else
  echo "FAIL: two runs: $(cat "$work/b.out"); left: $(ls -A "$w2")"; fail=1
fi

echo "== a launcher sent SIGTERM ends the run: command, proxy and placeholders gone, exit 143"
cp "$work/policy.policy" "$work/killed.policy"
mkdir -p "$work/killed"
# A command no other process on the machine runs (pgrep looks at every
# process: a plain `sleep 300` elsewhere once failed this check).
long="300.$$"
(cd "$work/killed" && exec "$run" "$work/killed.policy" --allow-weaker -- sleep "$long") 2>/dev/null &
launcher=$!
for _ in $(seq 100); do pgrep -f "gatehouse-egress --quiet --policy $work/killed.policy" >/dev/null && pgrep -f "^sleep $long\$" >/dev/null && break; sleep 0.1; done
pgrep -f "gatehouse-egress --quiet --policy $work/killed.policy" >/dev/null || { echo "FAIL: the proxy never started"; fail=1; }
[ -e "$work/killed/.agents" ] || { echo "FAIL: the run made no placeholder for .agents"; fail=1; }
kill -TERM "$launcher"
set +e
wait "$launcher"
code=$?
set -e
[ "$code" = 143 ] && echo "ok: the launcher ended with 143 (SIGTERM)" || { echo "FAIL: the launcher ended with $code"; fail=1; }
[ ! -e "$work/killed/.agents" ] && [ ! -e "$work/killed/.zerocode" ] \
  && echo "ok: its placeholders are gone" || { echo "FAIL: placeholders left: $(ls -A "$work/killed")"; fail=1; }
for _ in $(seq 50); do pgrep -f "gatehouse-egress --quiet --policy $work/killed.policy" >/dev/null || pgrep -f "^sleep $long\$" >/dev/null || break; sleep 0.1; done
if pgrep -f "gatehouse-egress --quiet --policy $work/killed.policy" >/dev/null || pgrep -f "^sleep $long\$" >/dev/null; then
  echo "FAIL: left running: $(pgrep -af "gatehouse-egress --quiet --policy $work/killed.policy|^sleep $long\$")"; fail=1
  pkill -f "gatehouse-egress --quiet --policy $work/killed.policy"; pkill -f "^sleep $long\$"
else
  echo "ok: the proxy and the command ended with the launcher"
fi

echo "== unprivileged: a user namespace of its own (as nobody)"
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null; then
  nb=$work/nobody && mkdir -p "$nb/ws/src" && chmod -R 777 "$nb" && chmod 755 "$work" && chmod 644 "$work/policy.policy"
  set +e
  out=$(cd "$nb/ws" && setpriv --reuid=65534 --regid=65534 --clear-groups env HOME=/nonexistent PORT=$port \
    "$run" "$work/policy.policy" --allow-weaker -- sh -c 'echo x > src/a && echo wrote; echo x > /etc/gh-run-x 2>/dev/null || echo etc-denied; curl -s -o /dev/null -w "%{http_code}\n" "http://127.0.0.1:$PORT/"' 2>/dev/null)
  set -e
  if [ "$(echo $out)" = "wrote etc-denied 200" ] && [ "$(stat -c %u "$nb/ws/src/a")" = 65534 ]; then echo "ok: as nobody: $(echo $out), the file is nobody's"; else echo "FAIL: as nobody: $out"; fail=1; fi
else
  echo "skipped: not root, or no setpriv"
fi

echo "== a policy file the command can write: its changes are not taken while it runs"
# The policy inside the workspace: the command rewrites it to allow the
# loopback server; the proxy (and the apps rules) keep the launch's.
self=$work/self && mkdir -p "$self"
printf 'policy self {\n  sandbox workspace-write { exclude "/tmp" }\n  approvals never\n  network {\n    default deny\n  }\n}\n' > "$self/self.policy"
set +e
out=$(cd "$self" && env PORT=$port "$run" self.policy -- sh -c 'sed -i "s/default deny/default deny\n    allow ip 127.0.0.1 port $PORT/" self.policy && sleep 1 && curl -s -o /dev/null -w "%{http_code}" "http://127.0.0.1:$PORT/"' 2>"$work/self.err")
set -e
if grep -q "allow ip 127.0.0.1 port $port" "$self/self.policy" && [ "$out" = 403 ] && grep -q "the command may write self.policy" "$work/self.err"; then
  echo "ok: the command rewrote its own policy to allow the server; the proxy still refused it ($out), and said why on stderr"
else
  echo "FAIL: a policy the command rewrote: got '$out'; the file: $(tr '\n' ' ' < "$self/self.policy"); stderr: $(cat "$work/self.err")"; fail=1
fi

if [ "$fail" != 0 ]; then echo "stderr of the run:"; cat "$work/err"; exit 1; fi
echo "gatehouse-run end to end: all checks hold"
