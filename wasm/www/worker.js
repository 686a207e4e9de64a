// The engine runs here, so that typing never waits for it.
import init, { check, format, compile, version } from "./pkg/gatehouse_wasm.js";

const ready = init();
let handle = null;
let handleSource = null;

self.onmessage = async ({ data }) => {
  await ready;
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
