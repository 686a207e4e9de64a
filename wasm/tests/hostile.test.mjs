// Hostile policy text in Node: a nesting bomb and an oversized source get
// their diagnostics from every entry point of the module — never a
// `RangeError: Maximum call stack size exceeded`, never a trap. Run with
// `node --test wasm/tests/` after wasm/build.sh (the same cases run in
// headless Chromium in wasm/tests/glue.rs).
import { test, before } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join, dirname } from "node:path";
import { fileURLToPath } from "node:url";
import init, { check, format, compile, evaluate } from "../www/pkg/gatehouse_wasm.js";

const here = dirname(fileURLToPath(import.meta.url));

before(async () => {
  await init({ module_or_path: readFileSync(join(here, "..", "www", "pkg", "gatehouse_wasm_bg.wasm")) });
});

const bombs = {
  // Twenty thousand braces after a statement.
  "braces after a statement": "policy p {\n  network {\n    allow domain x.example " + "{".repeat(20000) + "\n  }\n}\n",
  // The same inside a raw string's escaped view: read as an ordinary
  // string the braces are hidden, read as the raw string the statement
  // rule sees, they are not.
  "braces behind a raw string": 'policy p {\n  guardian {\n    deny command ~ r"a\\";' + "{".repeat(20000) + '"\n  }\n}\n',
  // An ordinary string that holds `r"`.
  "braces after a string holding r\"": 'policy p { network { allow domain "ar" ' + "{".repeat(20000) + "\n} }\n",
  // An unterminated string does not hide what follows on its line.
  "braces after an unterminated string": 'policy p { network { allow domain "x ' + "{".repeat(20000) + "\n} }\n",
};
const huge = "# padding\n".repeat(Math.ceil((9 * 1024 * 1024) / 10)); // 9 MiB

function codesOf(diags) {
  return diags.map((d) => d.code);
}

for (const [name, text] of [...Object.entries(bombs), ["a 9 MiB source", huge]]) {
  const code = name === "a 9 MiB source" ? "source_too_large" : "too_deeply_nested";

  test(`${name}: check reports ${code}`, () => {
    assert.deepEqual(codesOf(JSON.parse(check(text))), [code]);
  });

  test(`${name}: format refuses with ${code}`, () => {
    const f = JSON.parse(format(text));
    assert.equal(f.ok, false);
    assert.deepEqual(codesOf(f.diagnostics), [code]);
  });

  test(`${name}: compile throws ${code}`, () => {
    let thrown;
    try {
      compile(text).free();
    } catch (e) {
      thrown = e;
    }
    assert.ok(typeof thrown === "string", `compile threw ${thrown}`);
    assert.deepEqual(codesOf(JSON.parse(thrown)), [code]);
  });

  test(`${name}: evaluate answers ${code}`, () => {
    const r = JSON.parse(evaluate(text, "", "connect github.com:443"));
    assert.deepEqual(codesOf(r.errors), [code]);
  });
}

test("the module still works after the bombs", () => {
  const h = compile("policy p {\n  network {\n    allow domain github.com\n  }\n}\n");
  assert.equal(JSON.parse(h.evaluate("", "connect github.com:443"))[0].decision, "allow");
  h.free();
});
