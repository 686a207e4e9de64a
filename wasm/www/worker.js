// The engine runs here, so that typing never waits for it.
import init, { check, format, compile, version } from "./pkg/gatehouse_wasm.js";

// A module that loads but cannot start (a broken or stale www/pkg) says
// so to the page, which then tells the user what to run.
const ready = init().then(() => true, (e) => {
  self.postMessage({ fatal: `the engine did not start (${String(e).slice(0, 120)})` });
  return false;
});
let handle = null;
let handleSource = null;

self.onmessage = async ({ data }) => {
  if (!(await ready)) return;
  const { id, op } = data;
  let result;
  try {
    if (op === "version") result = version();
    else if (op === "check") {
      const diagnostics = JSON.parse(check(data.source));
      let policies = [];
      if (!diagnostics.some((d) => d.severity === "error")) {
        if (handleSource !== data.source) { handle?.free(); handle = compile(data.source); handleSource = data.source; }
        policies = JSON.parse(handle.policies());
      }
      result = { diagnostics, policies };
    } else if (op === "format") result = JSON.parse(format(data.source));
    else if (op === "evaluate") {
      if (handleSource !== data.source) { handle?.free(); handle = compile(data.source); handleSource = data.source; }
      result = JSON.parse(handle.evaluate(data.policy, data.queries));
    }
  } catch (e) {
    result = { error: String(e) };
  }
  self.postMessage({ id, result });
};
