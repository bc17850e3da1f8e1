// Generated facade sources for host and WASM modules: a port of protocol/src/facade.rs, so the
// browser builds the same text the Rust guest does. Exports of a host facade come from the
// host registry (host-modules.json, exported from the Rust protocol crate), never from a
// delivery, so a delivery cannot widen what an id means.

import registry from "./host-modules.json" with { type: "json" };

export const HOST_BRIDGE_SPECIFIER = "nodetool:host-bridge";
export const WASM_BRIDGE_SPECIFIER = "nodetool:wasm-bridge";

/** A JavaScript string literal (JSON string syntax is valid JavaScript). */
const jsString = (s) => JSON.stringify(s);

/** The registry row for a host id, by exact own-key match. */
export function hostModule(id) {
  return Object.prototype.hasOwnProperty.call(registry.modules, id) ? registry.modules[id] : null;
}

export function hostFacadeSource(moduleKey, exports) {
  const key = jsString(moduleKey);
  let out = `import { __call } from ${jsString(HOST_BRIDGE_SPECIFIER)};\n`;
  for (const name of exports) {
    out += `export async function ${name}(...args) { return __call(${key}, ${jsString(name)}, args); }\n`;
  }
  out += `export default { ${exports.join(", ")} };\n`;
  return out;
}

export function wasmFacadeSource(moduleKey, exports) {
  const key = jsString(moduleKey);
  let out = `import { __call } from ${jsString(WASM_BRIDGE_SPECIFIER)};\n`;
  for (const e of exports) {
    out += `export async function ${e.as}(...args) { return __call(${key}, ${jsString(e.as)}, args); }\n`;
  }
  return out;
}
