// The browser runner's page API. `createRunner()` starts a worker that runs Code node bodies
// on QuickJS; `run({code, input?, timeoutMs?, secrets?, modules?})` answers like
// `POST /api/run`. A worker that does not answer within the run's deadline plus a grace period
// is terminated (the run is reported as timed out) and the next run gets a fresh one.

const GRACE_MS = 10000;
const STANDARD_TIMEOUT_MS = 30000;

export function createRunner({ base, headers } = {}) {
  const root = new URL(base || ".", import.meta.url);
  let worker = null;
  let next = 0;
  const waiting = new Map();
  const stats = { fetched: 0, revalidated: 0, refused: 0 };

  function start() {
    worker = new Worker(new URL("runner-worker.js", root), { type: "module" });
    worker.addEventListener("message", (event) => {
      const { id, reply, stats: s } = event.data || {};
      if (s) Object.assign(stats, s);
      const w = waiting.get(id);
      if (w) {
        waiting.delete(id);
        clearTimeout(w.timer);
        w.resolve(reply);
      }
    });
    worker.addEventListener("error", (event) => {
      event.preventDefault();
      restart(`the browser runner's worker failed (${event.message || "unknown error"}); it was replaced, and nothing else was affected`);
    });
  }

  function restart(message) {
    if (worker) worker.terminate();
    worker = null;
    for (const [id, w] of waiting) {
      clearTimeout(w.timer);
      // A worker that died under its runs is what `sandbox-crashed` names on the server.
      w.resolve({ ok: false, error: { code: "sandbox-crashed", message }, logs: [] });
      waiting.delete(id);
    }
  }

  function run(request) {
    if (!worker) start();
    const id = ++next;
    const timeoutMs = Number(request.timeoutMs) || STANDARD_TIMEOUT_MS;
    return new Promise((resolve) => {
      // Runs are queued in the worker, so the watchdog allows for the ones ahead of this one.
      const ahead = waiting.size;
      const timer = setTimeout(() => {
        waiting.delete(id);
        restart("the browser runner stopped answering");
        resolve({ ok: false, error: { code: "timeout", message: `the run exceeded its ${timeoutMs} ms deadline` }, logs: [] });
      }, (ahead + 1) * (timeoutMs + GRACE_MS) + GRACE_MS);
      waiting.set(id, { resolve, timer });
      // `headers` (e.g. a server's `authorization`) go on every request the worker makes.
      worker.postMessage({ id, request: { ...request, signal: undefined }, headers: headers || {} });
    });
  }

  return { run, stats, close: () => restart("the runner was closed") };
}
