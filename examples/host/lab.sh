#!/usr/bin/env bash
# A host-mode lab (docs/host.md, "Try it"): N sandboxes — network
# namespaces behind veth pairs, as Docker and Firecracker set them up —
# under one `gatehouse-egress host` daemon, with a sandbox table, a policy
# and the control API; and everything taken down again. Root only.
#
#   examples/host/lab.sh up [-n N] [--host-netns NAME] [--policy FILE]
#                           [--upstream-dns ADDR:PORT] [--dir DIR]
#   examples/host/lab.sh run [--dir DIR] K COMMAND...  # COMMAND inside sandbox K
#   examples/host/lab.sh down [--dir DIR]
#
# With --host-netns NAME the "host" is a namespace of its own, NAME, and
# the world outside is one more namespace, NAME-o: a web server on
# 11.0.0.1:80 and a DNS server on 11.0.0.53 that answers every name under
# lab.test with 11.0.0.1 (examples/host/lab_dns.py). Nothing touches the
# machine's own interfaces; this is how CI runs it. Without it, the
# sandboxes hang off this machine's own namespace and reach the internet
# through it (forwarding on, and a masquerade rule in the table
# `ip gatehouse_lab`, both undone by `down`); the upstream resolver is the
# first nameserver of /etc/resolv.conf unless --upstream-dns says.
#
# The daemon is GATEHOUSE_EGRESS, else `gatehouse-egress` on PATH, else
# this checkout's target/release/gatehouse-egress.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
cmd=${1:-}
shift || true
dir=/tmp/gatehouse-lab
n=2
hostns=
policy=
upstream=
if [ "$cmd" = run ] && [ "${1:-}" = --dir ]; then
  dir=$2
  shift 2
fi
while [ $# -gt 0 ] && [ "$cmd" != run ]; do
  case $1 in
    -n) n=$2; shift 2 ;;
    --host-netns) hostns=$2; shift 2 ;;
    --policy) policy=$2; shift 2 ;;
    --upstream-dns) upstream=$2; shift 2 ;;
    --dir) dir=$2; shift 2 ;;
    *) echo "lab.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done

die() { echo "lab.sh: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || die "run it as root (it makes network namespaces)"

# In the host's namespace: the lab's own, or this machine's.
h() { if [ -n "$hostns" ]; then ip netns exec "$hostns" "$@"; else "$@"; fi; }
sbx() { echo "${prefix}-s$1"; }

case $cmd in
up)
  [ ! -e "$dir/lab.env" ] || die "a lab is up already ($dir); take it down first: $0 down --dir $dir"
  [[ $n =~ ^[0-9]+$ ]] && [ "$n" -ge 1 ] && [ "$n" -le 200 ] || die "-n takes 1 to 200"
  bin=${GATEHOUSE_EGRESS:-$(command -v gatehouse-egress || echo "$repo/target/release/gatehouse-egress")}
  [ -x "$bin" ] || die "no gatehouse-egress (cargo build --release -p gatehouse-egress, or set GATEHOUSE_EGRESS)"
  prefix=${hostns:-gl}
  mkdir -p "$dir/state"
  chmod 0700 "$dir"
  printf 'hostns=%q\nprefix=%q\nn=%q\n' "$hostns" "$prefix" "$n" > "$dir/lab.env"
  if [ -n "$hostns" ]; then
    ip netns add "$hostns"
    ip netns add "$hostns-o"
    ip -n "$hostns" link set lo up
    ip -n "$hostns-o" link set lo up
    ip -n "$hostns" link add gl-o0 type veth peer name eth0 netns "$hostns-o"
    ip -n "$hostns" addr add 11.0.0.254/24 dev gl-o0
    ip -n "$hostns" link set gl-o0 up
    ip -n "$hostns-o" addr add 11.0.0.1/24 dev eth0
    ip -n "$hostns-o" addr add 11.0.0.53/24 dev eth0
    ip -n "$hostns-o" link set eth0 up
    # The world outside answers the sandboxes through the host.
    ip -n "$hostns-o" route add 10.200.0.0/16 via 11.0.0.254
    mkdir -p "$dir/www"
    echo "hello from the lab's origin" > "$dir/www/index.html"
    ip netns exec "$hostns-o" python3 -m http.server 80 --bind 11.0.0.1 --directory "$dir/www" \
      > "$dir/origin.log" 2>&1 &
    echo $! > "$dir/origin.pid"
    ip netns exec "$hostns-o" python3 "$here/lab_dns.py" 11.0.0.53 11.0.0.1 > "$dir/dns.log" 2>&1 &
    echo $! > "$dir/dns.pid"
    upstream=${upstream:-11.0.0.53:53}
  else
    if [ -z "$upstream" ]; then
      ns=$(awk '$1 == "nameserver" {print $2; exit}' /etc/resolv.conf)
      [ -n "$ns" ] || die "no nameserver in /etc/resolv.conf: give --upstream-dns ADDR:PORT"
      case $ns in *:*) upstream="[$ns]:53" ;; *) upstream="$ns:53" ;; esac
    fi
    sysctl -n net.ipv4.ip_forward > "$dir/ip_forward.was"
    nft -f - <<EOF
table ip gatehouse_lab {
  chain post {
    type nat hook postrouting priority srcnat;
    ip saddr 10.200.0.0/16 oifname != "gl-s*" masquerade
  }
}
EOF
  fi
  h sysctl -qw net.ipv4.ip_forward=1
  for k in $(seq "$n"); do
    s=$(sbx "$k")
    ip netns add "$s"
    ip -n "$s" link set lo up
    h ip link add "gl-s$k" type veth peer name eth0 netns "$s"
    h ip addr add "10.200.$k.1/24" dev "gl-s$k"
    h ip link set "gl-s$k" up
    ip -n "$s" addr add "10.200.$k.2/24" dev eth0
    ip -n "$s" link set eth0 up
    ip -n "$s" route add default via "10.200.$k.1"
    # Any nameserver will do: the kernel sends every question to the
    # daemon's resolver.
    mkdir -p "/etc/netns/$s"
    echo "nameserver 10.200.$k.1" > "/etc/netns/$s/resolv.conf"
  done
  if [ -n "$policy" ]; then
    cp "$policy" "$dir/lab.policy"
  else
    cat > "$dir/lab.policy" <<'EOF'
policy lab {
  network {
    default deny
    allow domain allowed.lab.test
    allow domain example.com
  }
}
EOF
  fi
  {
    echo 'networks = ["10.200.0.0/16"]'
    echo 'interfaces = ["gl-s*"]'
    for k in $(seq "$n"); do
      printf '\n[[sandbox]]\nid = "sandbox-%s"\naddresses = ["10.200.%s.2"]\npolicy = "lab.policy"\n' "$k" "$k"
    done
  } > "$dir/sandboxes.toml"
  # Started directly (`ip netns exec` execs it), so that `$!` is the
  # daemon's own pid.
  set -- "$bin" host --sandboxes "$dir/sandboxes.toml" --upstream-dns "$upstream" \
    --control "$dir/control.sock" --state "$dir/state"
  if [ -n "$hostns" ]; then
    ip netns exec "$hostns" "$@" > "$dir/daemon.log" 2>&1 &
  else
    "$@" > "$dir/daemon.log" 2>&1 &
  fi
  echo $! > "$dir/daemon.pid"
  for _ in $(seq 200); do
    if [ -S "$dir/control.sock" ] && grep -q "host mode for $n sandbox" "$dir/daemon.log"; then
      echo "lab up: $n sandboxes (run one's commands with: $0 run K COMMAND), the daemon's log in $dir/daemon.log, its control socket $dir/control.sock"
      exit 0
    fi
    kill -0 "$(cat "$dir/daemon.pid")" 2>/dev/null || break
    sleep 0.1
  done
  cat "$dir/daemon.log" >&2
  die "the daemon did not start; take the lab down with: $0 down --dir $dir"
  ;;
run)
  [ -f "$dir/lab.env" ] || die "no lab is up ($dir)"
  # shellcheck disable=SC1091
  . "$dir/lab.env"
  k=${1:-}
  shift || true
  [[ $k =~ ^[0-9]+$ ]] && [ "$k" -ge 1 ] && [ "$k" -le "$n" ] || die "run K COMMAND: K is 1 to $n"
  exec ip netns exec "$(sbx "$k")" "$@"
  ;;
down)
  [ -f "$dir/lab.env" ] || die "no lab is up ($dir)"
  # shellcheck disable=SC1091
  . "$dir/lab.env"
  for p in daemon origin dns; do
    if [ -f "$dir/$p.pid" ]; then
      pid=$(cat "$dir/$p.pid")
      kill "$pid" 2>/dev/null || true
      for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    fi
  done
  for k in $(seq "$n"); do
    s=$(sbx "$k")
    ip netns del "$s" 2>/dev/null || true
    rm -rf "/etc/netns/$s"
  done
  if [ -n "$hostns" ]; then
    # The host's namespace takes its veths and nftables tables with it.
    ip netns del "$hostns" 2>/dev/null || true
    ip netns del "$hostns-o" 2>/dev/null || true
  else
    for k in $(seq "$n"); do ip link del "gl-s$k" 2>/dev/null || true; done
    # The daemon leaves its tables in force when it stops (fail closed):
    # the lab takes them out on purpose.
    nft delete table inet gatehouse_host 2>/dev/null || true
    nft delete table bridge gatehouse_host_br 2>/dev/null || true
    nft delete table ip gatehouse_lab 2>/dev/null || true
    [ ! -f "$dir/ip_forward.was" ] || sysctl -qw "net.ipv4.ip_forward=$(cat "$dir/ip_forward.was")"
  fi
  rm -rf "$dir"
  echo "lab down"
  ;;
*)
  sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
  ;;
esac
