#!/usr/bin/env bash
# The Neovim 0.7 setup of docs/editors.md, as written there, in a headless
# Neovim against `policyc lsp`: a broken policy opened, its diagnostics read
# back (issue 37, item 6). POLICYC names the binary (default: target/release/policyc).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
policyc=${POLICYC:-$root/target/release/policyc}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# The fenced block after the `<!-- neovim-0.7 -->` marker, word for word.
awk '/<!-- neovim-0.7 -->/ {m=1; next} m && /^```lua/ {in_=1; next} in_ && /^```/ {exit} in_ {print}' \
  "$root/docs/editors.md" > "$work/init.lua"
grep -q 'vim.lsp.start_client' "$work/init.lua" || { echo "no Neovim 0.7 snippet in docs/editors.md" >&2; exit 1; }
printf 'policy p {\n  netwrok {\n    allow domian x.test\n  }\n}\n' > "$work/broken.policy"
cat > "$work/check.lua" <<'LUA'
local ok = vim.wait(15000, function() return #vim.diagnostic.get(0) > 0 end, 50)
for _, d in ipairs(vim.diagnostic.get(0)) do
  io.stdout:write(string.format("%d:%d %s\n", d.lnum + 1, d.col + 1, d.message:gsub("\n.*", "")))
end
io.stdout:write("filetype=" .. vim.bo.filetype .. " diagnostics=" .. tostring(ok) .. "\n")
vim.cmd("qa!")
LUA
mkdir -p "$work/bin" && ln -s "$policyc" "$work/bin/policyc"
out=$(cd "$work" && PATH="$work/bin:$PATH" timeout 60 nvim --headless -u init.lua broken.policy -c "luafile check.lua" 2>&1)
echo "$out"
echo "$out" | grep -q "^filetype=gatehouse diagnostics=true" || { echo "no diagnostics from policyc lsp in Neovim $(nvim --version | head -1)" >&2; exit 1; }
echo "$out" | grep -q "^2:3 unknown statement \`netwrok\`" || { echo "the misspelled section was not reported at 2:3" >&2; exit 1; }
echo "$out" | grep -q "^3:11 unexpected \`domian\`" || { echo "the misspelled rule was not reported at 3:11" >&2; exit 1; }
echo "ok: $(nvim --version | head -1) shows policyc lsp's diagnostics with the docs' setup"
