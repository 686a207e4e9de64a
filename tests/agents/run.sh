#!/usr/bin/env bash
# The real Codex and Claude Code (npm, pinned) answered by `policyc hook`,
# installed with `policyc init --agent`, driven against tests/agents/model.py
# on loopback (docs/agents.md). Installs both into target/agents when
# missing. POLICYC: the policyc to test (default target/release/policyc).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
policyc="${POLICYC:-$root/target/release/policyc}"
prefix="$root/target/agents"
CODEX_VERSION=0.171.0
CLAUDE_VERSION=2.1.332
case "$(uname -m)" in
  x86_64) arch=x64; triple=x86_64-unknown-linux-musl ;;
  aarch64) arch=arm64; triple=aarch64-unknown-linux-musl ;;
  *) echo "tests/agents: no Codex or Claude Code build for $(uname -m)" >&2; exit 1 ;;
esac
codex="$prefix/node_modules/@openai/codex-linux-$arch/vendor/$triple/bin/codex"
claude="$prefix/node_modules/@anthropic-ai/claude-code-linux-$arch/claude"
if [ ! -x "$codex" ] || [ ! -x "$claude" ] \
  || ! "$codex" --version | grep -q "$CODEX_VERSION" \
  || ! "$claude" --version | grep -q "$CLAUDE_VERSION"; then
  mkdir -p "$prefix"
  # A package.json of its own, so that npm installs here and not into a
  # node_modules further up. Both packages ship their program as a
  # platform package (an optional dependency): no install script is run.
  [ -f "$prefix/package.json" ] || echo '{"private": true}' > "$prefix/package.json"
  (cd "$prefix" && npm install --silent --no-audit --no-fund \
    "@openai/codex@$CODEX_VERSION" "@anthropic-ai/claude-code@$CLAUDE_VERSION" >/dev/null)
fi
"$codex" --version
echo "claude $("$claude" --version)"
timeout 900 python3 "$root/tests/agents/e2e.py" "$policyc" "$codex" "$claude" "$@"
# Issue 60: Claude Code's own rules against its settings imported by
# `policyc import claude-code` and answered through the hook.
if [ "$#" -eq 0 ]; then
  timeout 600 python3 "$root/tests/agents/claude_import.py" "$policyc" "$claude"
fi
