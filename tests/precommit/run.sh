#!/usr/bin/env bash
# The hooks of .pre-commit-hooks.yaml through the real pre-commit (PyPI),
# as a user's repository runs them: a .pre-commit-config.yaml naming this
# repository at its HEAD commit, so pre-commit clones it, builds policyc with
# cargo (language: rust) once, and runs each hook on a formatted, an
# unformatted and a broken policy. (HEAD: commit before running this.)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
venv="$root/target/precommit-venv"
if [ ! -x "$venv/bin/pre-commit" ]; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet pre-commit
fi
export PRE_COMMIT_HOME="$root/target/pre-commit-home"
# cargo install reuses this repository's release build.
export CARGO_TARGET_DIR="$root/target"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
git init -q .
git config user.email ci@example.invalid
git config user.name ci
cp "$root/policies/coding-agent.policy" good.policy
printf 'policy  messy {network{allow domain a.example}}\n' > messy.policy
printf 'policy broken {\n  permissions { deny shell.exce }\n}\n' > broken.policy
rev=$(git -C "$root" rev-parse HEAD)
cat > .pre-commit-config.yaml <<YAML
repos:
  - repo: $root
    rev: $rev
    hooks:
      - id: policyc-fmt
      - id: policyc-check
      - id: policyc-test
YAML
git add .
hook() {  # hook EXPECTED-EXIT ID FILE
  local want=$1 id=$2 file=$3 got=0
  "$venv/bin/pre-commit" run "$id" --files "$file" > out.txt 2>&1 || got=$?
  if [ "$got" != "$want" ]; then
    cat out.txt >&2
    echo "pre-commit hook $id on $file: exit $got, wanted $want" >&2
    exit 1
  fi
  echo "ok: $id on $file exits $got"
}
hook 0 policyc-fmt good.policy
hook 1 policyc-fmt messy.policy
grep -q "would reformat messy.policy" out.txt
hook 0 policyc-check good.policy
hook 1 policyc-check broken.policy
grep -q "did you mean \`shell.exec\`" out.txt
hook 0 policyc-test good.policy
echo "pre-commit: 6 passed, 0 failed"
