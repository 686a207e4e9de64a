#!/usr/bin/env bash
# `policyc export srt` under the real sandbox-runtime (issue 51, item 9):
# srt 0.0.83 accepts the exported settings, and under it a read of every
# exported denyRead path and a write to every exported denyWrite path fail.
#   POLICYC=target/release/policyc tests/srt/export.sh [POLICY...]
# Needs root or unprivileged user namespaces, bubblewrap, socat, ripgrep.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
policyc=${POLICYC:-target/release/policyc}
[ -x "$policyc" ] || { echo "build policyc into $(dirname "$policyc") first" >&2; exit 1; }
for tool in bwrap socat rg; do
  command -v "$tool" >/dev/null || { echo "$tool is missing (apt-get install bubblewrap socat ripgrep)" >&2; exit 1; }
done
. tests/srt/install.sh
if [ $# -eq 0 ]; then set -- tests/data/srt-export/*.policy; fi
timeout 300 python3 tests/srt/export.py "$node22" "$srt_cli" "$root/$policyc" "$@"
