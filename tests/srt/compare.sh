#!/usr/bin/env bash
# Side by side with sandbox-runtime (docs/run.md): the same settings files
# through the real `srt` (npm, on Node 22, with Debian's bubblewrap) and
# through `policyc import srt` + `gatehouse-run`, compared probe by probe.
#   BIN=target/release tests/srt/compare.sh [SETTINGS.json...]
# Needs root or unprivileged user namespaces, bubblewrap, socat, ripgrep.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
bin=${BIN:-target/release}
for b in policyc gatehouse-run gatehouse-egress; do
  [ -x "$bin/$b" ] || { echo "build $b into $bin first" >&2; exit 1; }
done
for tool in bwrap socat rg; do
  command -v "$tool" >/dev/null || { echo "$tool is missing (apt-get install bubblewrap socat ripgrep)" >&2; exit 1; }
done
. tests/srt/install.sh
if [ $# -eq 0 ]; then set -- tests/data/import/srt-public/*.json tests/data/import/srt/*.json; fi
export PATH="$root/$bin:$PATH"
# The fixtures live outside /tmp (and so outside a checkout in /tmp): a
# settings file that makes /tmp writable must not make them writable; and
# outside /var, /home and /root, which real settings files deny.
mkdir -p /srv
COMPARE_WORK=$(mktemp -d /srv/gatehouse-srt-compare.XXXXXX)
export COMPARE_WORK
trap 'rm -rf "$COMPARE_WORK"' EXIT
timeout 900 python3 tests/srt/compare.py "$node22" "$srt_cli" "$root/$bin/policyc" "$root/$bin/gatehouse-run" "$@"
