// Node: the module is read from the package and instantiated at import,
// synchronously; every function is ready to call.
import { readFileSync } from "node:fs";
import * as glue from "./wasm/gatehouse_wasm.js";
import { setGlue } from "./api.js";

glue.initSync({ module: readFileSync(new URL("./wasm/gatehouse_wasm_bg.wasm", import.meta.url)) });
setGlue(glue);

export { version, check, format, compile, PolicyError } from "./api.js";

/** Already initialised under Node; kept so code written for the web entry runs here too. */
export async function init() {}
