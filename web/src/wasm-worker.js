// Runs one WASM call at a time: a fresh instance per call with an empty import object, so no
// global or memory outlives a call. The runner terminates this worker when a call overruns.
self.addEventListener("message", (event) => {
  const { id, module, exportName, args } = event.data || {};
  try {
    const instance = new WebAssembly.Instance(module, {});
    const f = instance.exports[exportName];
    if (typeof f !== "function") {
      self.postMessage({ id, trap: `export ${exportName} is not callable` });
      return;
    }
    const value = f(...args);
    self.postMessage({ id, value: value === undefined ? null : value });
  } catch (e) {
    self.postMessage({ id, trap: e && e.message ? e.message : String(e) });
  }
});
