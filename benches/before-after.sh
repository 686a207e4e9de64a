#!/usr/bin/env bash
# Decision and proxy speed of this tree against an earlier commit, in one
# run, alternately (so that the machine's drift hits both alike):
#
#   benches/before-after.sh [REV] [NOW] [ROUNDS]   REV defaults to 806c3c4,
#                                                  the main before issue 34;
#                                                  NOW to HEAD (both are
#                                                  built in worktrees under
#                                                  target/before-after)
#
# Decisions: benches/src/bin/stream.rs (4 096 distinct realistic queries,
# repeated) for `connect` by name at 1 000 and 100 000 rules and
# `connect_addr` at 1 000 rules, ns per decision. The proxy:
# egress/examples/compare (wrk through gatehouse-egress, keep-alive and one
# connection per request, 5 s each, 16 connections; squid, tinyproxy and
# nginx alongside as the machine's yardstick). Run it on an idle machine.
set -euo pipefail
cd "$(dirname "$0")/.."
rev=$(git rev-parse --short "${1:-806c3c4}")
now=$(git rev-parse --short "${2:-HEAD}")
rounds=${3:-2}
build() {  # build REV: the stream bench and the daemon, in a worktree of REV
  local dir=target/before-after/$1
  if [ ! -d "$dir" ]; then
    mkdir -p target/before-after
    git worktree add --detach "$dir" "$1" >/dev/null
  fi
  (cd "$dir" && CARGO_TARGET_DIR="$PWD/../target-$1" cargo build --release -q -p gatehouse-benches --bin stream && \
    CARGO_TARGET_DIR="$PWD/../target-$1" cargo build --release -q -p gatehouse-egress --bins --examples)
}
echo "== building $rev and $now (release)"
build "$rev"
build "$now"
oldbin=target/before-after/target-$rev/release
newbin=target/before-after/target-$now/release
echo "== decisions (ns per decision; 20 000 000 decisions a run)"
for r in $(seq "$rounds"); do
  for side in "$rev:$oldbin" "$now:$newbin"; do
    name=${side%%:*}; bin=${side#*:}
    for args in "name 1000" "name 100000" "addr 1000"; do
      printf '%-8s %-12s ' "$name" "$args"
      # shellcheck disable=SC2086
      "$bin/stream" $args 20000000 | tail -1
    done
  done
done
echo "== the proxy (egress/examples/compare BIN 5 16)"
for r in $(seq "$rounds"); do
  for side in "$rev:$oldbin" "$now:$newbin"; do
    name=${side%%:*}; bin=${side#*:}
    echo "-- $name"
    "$newbin/examples/compare" "$bin/gatehouse-egress" 5 16
  done
done
