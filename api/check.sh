#!/usr/bin/env bash
# The public API of the `gatehouse` crate, as cargo-public-api lists it, must
# match the checked-in listing `api/gatehouse.txt`: a change to the facade is
# a deliberate, reviewed change to that file, never a side effect.
#
#   api/check.sh           compare (CI)
#   api/check.sh --bless   rewrite the listing after an intended change
#
# Needs a nightly toolchain (rustdoc's JSON output) and cargo-public-api,
# installed here when missing. Auto-trait and blanket impls are left out
# (`-ss`): they follow from the types, and their spelling changes between
# nightlies.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! cargo public-api --version >/dev/null 2>&1; then
  cargo install --locked cargo-public-api --version 0.52.0
fi
if ! rustup toolchain list | grep -q nightly; then
  rustup toolchain install nightly --profile minimal
fi
# No third-party type in a public signature, except those of the three
# public dependencies (serde, serde_json, ipnet; docs/api.md says why): the
# compiler's exported_private_dependencies lint, which needs nightly's
# -Zpublic-dependency, with those three marked `public = true` in a copy
# of the manifest made for this check only (stable cargo warns about the
# key on every build, so Cargo.toml does not carry it).
root=$PWD
if [ "${1:-}" != "--bless" ]; then
  # On a copy of the sources (target/api-tree), with its own target
  # directory: nothing here edits the checkout, so CI runs this beside its
  # other builds (.ci/lane), and an interrupted run leaves no marked manifest.
  tree=$root/target/api-tree
  rm -rf "$tree"
  mkdir -p "$tree"
  git ls-files -z --cached --others --exclude-standard \
    | tar --null --ignore-failed-read -T - -cf - 2>/dev/null | tar -xf - -C "$tree"
  sed -i -E 's/^(serde|serde_json|ipnet) = \{ (.*) \}$/\1 = { \2, public = true }/; s/^serde_json = "1"$/serde_json = { version = "1", public = true }/' "$tree/Cargo.toml"
  grep -c 'public = true' "$tree/Cargo.toml" | grep -qx 3 || { echo "api/check.sh: could not mark the public dependencies" >&2; exit 1; }
  # gatehouse-otel: no third-party type at all in its public API (an
  # OpenTelemetry type there would tie its users to the SDK's version);
  # only the engine's own types (issue 55).
  sed -i -E 's/^gatehouse = \{ path = "\.\." \}$/gatehouse = { path = "..", public = true }/' "$tree/otel/Cargo.toml"
  grep -q 'public = true' "$tree/otel/Cargo.toml" || { echo "api/check.sh: could not mark gatehouse public for gatehouse-otel" >&2; exit 1; }
  (cd "$tree" && RUSTFLAGS="-D exported_private_dependencies" \
    cargo +nightly check --quiet -Zpublic-dependency -p gatehouse -p gatehouse-otel --target-dir "$root/target/public-dependency")
  echo "no private dependency in the public API of gatehouse and gatehouse-otel"
fi
now=$(mktemp)
trap 'rm -f "$now"' EXIT
# Its own target directory too (rustdoc JSON, nightly).
CARGO_TARGET_DIR="$root/target/public-api" cargo public-api -p gatehouse --features import,bundle -ss 2>/dev/null > "$now"
if [ "${1:-}" = "--bless" ]; then
  cp "$now" api/gatehouse.txt
  echo "api/gatehouse.txt: $(wc -l < api/gatehouse.txt) lines"
  exit 0
fi
if ! diff -u api/gatehouse.txt "$now"; then
  echo >&2
  echo "the public API of gatehouse changed (above: - the listing, + now)." >&2
  echo "if that is intended, run api/check.sh --bless and commit api/gatehouse.txt" >&2
  exit 1
fi
echo "public API unchanged: $(wc -l < api/gatehouse.txt) lines"
