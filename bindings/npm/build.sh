#!/usr/bin/env bash
# Packs gatehouse-engine from the playground's WebAssembly module and tests
# the tarball as a user would: installed into an empty folder, imported by
# its name (node --test), and a TypeScript example checked by tsc.
#   bindings/npm/build.sh          pack and test
#   bindings/npm/build.sh --pack   pack only (target/npm/gatehouse-engine-VERSION.tgz)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
pkg="$root/wasm/www/pkg"
if [ ! -f "$pkg/gatehouse_wasm_bg.wasm" ]; then
  "$root/wasm/build.sh"
fi
out="$root/target/npm"
stage="$out/stage"
rm -rf "$stage" && mkdir -p "$stage/wasm"
cp "$here"/{package.json,api.js,node.js,web.js,index.d.ts,README.md} "$stage/"
cp "$pkg/gatehouse_wasm.js" "$pkg/gatehouse_wasm_bg.wasm" "$stage/wasm/"
tarball="$out/$(cd "$stage" && npm pack --silent --pack-destination "$out")"
echo "packed $tarball ($(stat -c %s "$tarball") bytes)"
[ "${1:-}" = --pack ] && exit 0

user="$out/user"
rm -rf "$user" && mkdir -p "$user"
cd "$user"
npm init -y >/dev/null
npm install --no-audit --no-fund --silent "$tarball" typescript@5
cp "$here"/test/*.test.mjs "$user/"
node --test "$user"/*.test.mjs
cp "$here/examples/quickstart.ts" "$here/examples/tsconfig.json" "$user/"
npx --no-install tsc -p "$user/tsconfig.json"
# The comparison with cedar-wasm runs (a short stream; BENCHMARKS.md has the
# full run), and the two engines agree on every query first.
npm install --no-audit --no-fund --silent @cedar-policy/cedar-wasm@4
cp "$here/bench/compare_cedar.mjs" "$user/"
node "$user/compare_cedar.mjs" --quick
echo "npm package: ok"
