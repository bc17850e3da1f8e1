// The runner's worker: runs bodies off the page's main thread, one at a time, and answers each
// request by id. The page terminates this worker if a run overstays its deadline.
import { createRunner } from "./run.js";

const base = new URL(".", self.location.href);
// Headers the page asked for (a server's `authorization`), added to every delivery and host call.
let extraHeaders = {};
const runner = createRunner({
  wasmUrl: new URL("emscripten-module.wasm", base).href,
  wasmWorkerUrl: new URL("wasm-worker.js", base).href,
  fetchImpl: (url, init = {}) => globalThis.fetch(url, { ...init, headers: { ...(init.headers || {}), ...extraHeaders } }),
});

let queue = Promise.resolve();
self.addEventListener("message", (event) => {
  const { id, request, headers } = event.data || {};
  queue = queue.then(async () => {
    extraHeaders = headers && typeof headers === "object" ? headers : {};
    let reply;
    try {
      reply = await runner.run(request || {});
    } catch (e) {
      reply = { ok: false, error: { code: "runtime-error", message: `the browser runner failed: ${e && e.message ? e.message : e}` }, logs: [] };
    }
    self.postMessage({ id, reply, stats: { ...runner.store.stats } });
  });
});
