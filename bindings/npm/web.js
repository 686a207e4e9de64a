// Browsers and bundlers: `await init()` fetches and instantiates the module
// (from beside this file, or from `input`), then the API is ready.
import initWasm, * as glue from "./wasm/gatehouse_wasm.js";
import { setGlue } from "./api.js";

let ready = null;

export function init(input) {
  ready ??= initWasm(input === undefined ? undefined : { module_or_path: input }).then(() => setGlue(glue));
  return ready;
}

export { version, check, format, compile, PolicyError } from "./api.js";
