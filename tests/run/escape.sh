#!/usr/bin/env bash
# Ways out of gatehouse-run (issue 54, docs/run.md "Threat model"): a probe
# (escape_probe.py) tries each from inside the command, as root and as
# nobody, with real things to escape to outside: a named network namespace
# with a server in it, a host unix socket and an abstract one, a process
# holding a secret in its environment, another run whose policy allows a
# host server, file handles of hidden and protected files. The same probe
# runs first outside any sandbox, as root: there every case must escape, so
# that each case inside is a test that can fail. 0 escapes inside passes.
#   BIN=target/release tests/run/escape.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
bin=${BIN:-$root/target/release}
case "$bin" in /*) ;; *) bin=$root/$bin ;; esac
run=$bin/gatehouse-run
[ -x "$run" ] && [ -x "$bin/gatehouse-egress" ] || { echo "build gatehouse-run and gatehouse-egress into $bin first" >&2; exit 1; }
[ "$(id -u)" = 0 ] || { echo "escape.sh needs root (it runs the suite as root and as nobody)" >&2; exit 1; }
py=/usr/bin/python3

work=$(mktemp -d /tmp/gh-escape.XXXXXX)
chmod 755 "$work"
netns=gh-esc-$$
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  ip netns del "$netns" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
cp "$root/tests/run/escape_probe.py" "$work/probe.py"
chmod 644 "$work/probe.py"

free_port() { $py -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# A server that says MSG to whoever connects: tcp PORT | unix PATH | abstract NAME.
cat > "$work/serve.py" <<'SERVE'
import socket, sys
kind, addr, msg = sys.argv[1], sys.argv[2], sys.argv[3].encode()
if kind == "tcp":
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(("127.0.0.1", int(addr)))
else:
    s = socket.socket(socket.AF_UNIX); s.bind(addr if kind == "unix" else "\0" + addr)
    if kind == "unix":
        import os; os.chmod(addr, 0o777)
s.listen(16)
while True:
    c, _ = s.accept()
    try:
        c.settimeout(1)
        try: c.recv(4096)
        except OSError: pass
        c.sendall(b"HTTP/1.0 200 OK\r\nContent-Length: %d\r\n\r\n" % len(msg) + msg)
    except OSError:
        pass
    finally:
        c.close()
SERVE

# The things outside to escape to.
host_port=$(free_port)
$py "$work/serve.py" tcp "$host_port" host-secret & pids+=($!)
mkdir -p "$work/sock" && chmod 777 "$work/sock"
$py "$work/serve.py" unix "$work/sock/host.sock" unix-secret & pids+=($!)
abstract=gh-esc-abstract-$$
$py "$work/serve.py" abstract "$abstract" unix-secret & pids+=($!)
ip netns add "$netns"
ip netns exec "$netns" ip link set lo up
ns_port=$(free_port)
ip netns exec "$netns" $py "$work/serve.py" tcp "$ns_port" netns-secret & pids+=($!)
marker=GH_ESCAPE_MARKER_$$
# Every server up before anything runs.
$py - "$host_port" "$abstract" "$work/sock/host.sock" <<'READY'
import socket, sys, time
port, abstract, path = sys.argv[1:]
for family, addr in ((socket.AF_INET, ("127.0.0.1", int(port))), (socket.AF_UNIX, "\0" + abstract), (socket.AF_UNIX, path)):
    for _ in range(100):
        try:
            socket.socket(family).connect(addr)
            break
        except OSError:
            time.sleep(0.05)
    else:
        sys.exit(f"no server at {addr!r}")
READY
for _ in $(seq 100); do ip netns exec "$netns" $py -c "import socket; socket.create_connection(('127.0.0.1', $ns_port))" 2>/dev/null && break; sleep 0.05; done

# world DIR OWNER: a home with a key, a workspace with a repository, a
# hidden .env, a read-only target/release, and the policy.
world() {
  local d=$1 owner=$2
  mkdir -p "$d/home/.ssh" "$d/ws/.git/hooks" "$d/ws/target/release" "$d/ws/src"
  echo "SECRET-ssh-key" > "$d/home/.ssh/id_rsa"
  echo "SECRET=env-file" > "$d/ws/.env"
  printf '#!/bin/sh\nexit 0\n' > "$d/ws/.git/hooks/pre-commit"
  echo '[core]' > "$d/ws/.git/config"
  echo original > "$d/ws/target/release/app"
  cat > "$d/policy" <<POLICY
policy escape {
  sandbox workspace-write {
    exclude "/tmp"
    none "~/.ssh"
    none ".env"
    read "target/release"
  }
  approvals never
  network { default deny }
}
POLICY
  cat > "$d/other.policy" <<POLICY
policy other {
  sandbox workspace-write { exclude "/tmp" }
  approvals never
  network {
    default deny
    allow ip 127.0.0.1 port $host_port
  }
}
POLICY
  chown -R "$owner" "$d"
  chmod -R go+rX "$d"
  chmod 700 "$d/home/.ssh"
}

# probe_env DIR VICTIM: the probe's inputs.
probe_env() {
  local d=$1 victim=$2
  echo GH_MOUNT="$(findmnt -n -o TARGET -T "$d")" \
    GH_HANDLE_SSH="$($py "$work/probe.py" handle "$d/home/.ssh/id_rsa")" \
    GH_HANDLE_ENV="$($py "$work/probe.py" handle "$d/ws/.env")" \
    GH_HANDLE_HOOK="$($py "$work/probe.py" handle "$d/ws/.git/hooks/pre-commit")" \
    GH_NETNS="$netns" GH_NETNS_PORT="$ns_port" GH_MARKER="$marker" GH_VICTIM="$victim" \
    GH_HOST_SOCK="$work/sock/host.sock" GH_ABSTRACT="$abstract" GH_HOST_PORT="$host_port" HOME="$d/home"
}

# victim AS: a process outside holding the marker in its environment; its
# pid in $v.
victim() {
  setpriv --reuid="$1" --regid="$1" --clear-groups env "SECRET_TOKEN=$marker" sleep 600 > /dev/null 2>&1 &
  v=$!
  pids+=("$v")
}

fail=0
cases="handle-read-ssh handle-read-env handle-append-hook setns-named-netns proc-environ signal-outside unix-socket-host unix-socket-abstract other-run-proxy rename-parent case-variant-git case-variant-symlink case-variant-rename case-variant-race umount-protection"

echo "== the control: outside any sandbox, as root, every case escapes"
world "$work/control" 0
victim 0
(cd "$work/control/ws" && env $(probe_env "$work/control" "$v") GH_CONTROL=1 $py "$work/probe.py" probe) > "$work/control.out" 2>&1 || true
for c in $cases; do
  line=$(grep -E "^$c " "$work/control.out" || echo "$c missing")
  case "$line" in
    "$c escaped"*) ;;
    *) echo "FAIL: the control did not escape, so this case tests nothing: $line"; fail=1 ;;
  esac
done
[ "$fail" = 0 ] && echo "ok: $(grep -c escaped "$work/control.out") cases escape outside"

# inside AS LABEL: the probe inside gatehouse-run as user AS (0 or 65534).
inside() {
  local as=$1 label=$2 d=$work/$2
  world "$d" "$as"
  victim "$as"
  # Another run, as the same user, whose policy reaches the host server.
  (cd "$d/ws" && setpriv --reuid="$as" --regid="$as" --clear-groups env HOME="$d/home" \
    "$run" "$d/other.policy" -- sleep 30) > /dev/null 2>&1 & pids+=($!)
  sleep 1
  echo "== inside gatehouse-run, as $label"
  set +e
  (cd "$d/ws" && setpriv --reuid="$as" --regid="$as" --clear-groups env $(probe_env "$d" "$v") \
    "$run" "$d/policy" -- $py "$work/probe.py" probe) > "$d.out" 2> "$d.err"
  set -e
  local n=0
  for c in $cases; do
    line=$(grep -E "^$c " "$d.out" || echo "$c missing")
    case "$line" in
      "$c held"*) echo "ok: $line" ;;
      *) echo "FAIL: $line"; fail=1; n=$((n + 1)) ;;
    esac
  done
  # What the probe's claims cannot show: the state outside.
  kill -0 "$v" 2>/dev/null && echo "ok: the process outside is alive" || { echo "FAIL: the process outside was killed"; fail=1; n=$((n + 1)); }
  [ "$(cat "$d/ws/target/release/app")" = original ] && [ ! -e "$d/ws/target-moved" ] \
    && echo "ok: target/release is as it was" || { echo "FAIL: target/release was freed: $(ls "$d/ws")"; fail=1; n=$((n + 1)); }
  ! grep -q planted "$d/ws/.git/hooks/pre-commit" && [ "$(cat "$d/ws/.git/config")" = '[core]' ] \
    && echo "ok: .git is as it was" || { echo "FAIL: .git changed"; fail=1; n=$((n + 1)); }
  local variants
  variants=$(cd "$d/ws" && ls -A | grep -ix '\.git' | grep -vx '\.git' || true)
  [ -z "$variants" ] && echo "ok: no case variant of .git was made" || { echo "FAIL: made: $variants"; fail=1; n=$((n + 1)); }

  echo "as $label: $n escapes"
  [ "$n" = 0 ] || { echo "stderr of the run:"; cat "$d.err"; }
}

inside 0 root
inside 65534 nobody

echo "== a policy that allows one unix socket path"
# Refused like every other socket by default (the kernel cannot tell one
# path from another; sandbox-runtime on Linux refuses them all); with
# --socket-paths the allowed one connects and the other, bound before the
# run, is hidden.
$py "$work/serve.py" unix "$work/sock/allowed.sock" unix-secret & pids+=($!)
for _ in $(seq 50); do [ -S "$work/sock/allowed.sock" ] && break; sleep 0.1; done
cat > "$work/sockets.policy" <<POLICY
policy sockets {
  sandbox workspace-write { exclude "/tmp" }
  approvals never
  network {
    default deny
    allow socket "$work/sock/allowed.sock"
  }
}
POLICY
connect='import socket, sys
for p in sys.argv[1:]:
    try:
        s = socket.socket(socket.AF_UNIX); s.settimeout(3); s.connect(p); print(p.rsplit("/", 1)[1], "connected")
    except OSError as e:
        print(p.rsplit("/", 1)[1], "refused", e.strerror)'
mkdir -p "$work/sockws"
got=$(cd "$work/sockws" && "$run" "$work/sockets.policy" -- $py -c "$connect" "$work/sock/allowed.sock" "$work/sock/host.sock" 2>/dev/null | awk '{print $1, $2}' | tr '\n' ' ')
[ "$got" = "allowed.sock refused host.sock refused " ] && echo "ok: by default both refused" || { echo "FAIL: by default: $got"; fail=1; }
got=$(cd "$work/sockws" && "$run" --socket-paths "$work/sockets.policy" -- $py -c "$connect" "$work/sock/allowed.sock" "$work/sock/host.sock" 2>/dev/null | awk '{print $1, $2}' | tr '\n' ' ')
[ "$got" = "allowed.sock connected host.sock refused " ] && echo "ok: with --socket-paths the allowed one connects, the other is hidden" || { echo "FAIL: with --socket-paths: $got"; fail=1; }

[ "$fail" = 0 ] || exit 1
echo "gatehouse-run escape suite: 0 escapes as root and as nobody"
