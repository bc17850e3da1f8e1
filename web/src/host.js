// Host modules from the browser: a port of host-modules' HostDispatcher checks, with each call
// sent to the server's POST /api/host-modules/{id}/{export}. The exports and the pinned pack
// of every id come from the host registry (host-modules.json), never from a delivery.

import { hostModule } from "./facade.js";
import { packNameOf } from "./names.js";

/** Rust's `{:?}` of a string, near enough: a JSON string literal. */
export const debugString = (s) => JSON.stringify(s);

/** The dispatcher for the host modules of a resolution, or null; throws on a forged one. */
export function hostDispatcherFor(modules, { fetchImpl } = {}) {
  const declared = new Map();
  for (const m of modules) {
    if (m.kind !== "host") continue;
    const spec = hostModule(m.hostId);
    if (!spec) {
      throw new Error(
        `${m.specifier}: "${m.hostId}" is not a host module NodeTool implements — host modules are first-party only, and a pack cannot bring its own`,
      );
    }
    const pack = packNameOf(m.specifier);
    if (spec.packName !== pack || m.packName !== pack) {
      throw new Error(`${m.specifier}: host module "${m.hostId}" belongs to ${spec.packName}`);
    }
    declared.set(m.specifier, { id: m.hostId, ...spec });
  }
  return declared.size ? new HostDispatcher(declared, fetchImpl || ((...a) => globalThis.fetch(...a))) : null;
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

class HostDispatcher {
  constructor(declared, fetchImpl) {
    this.declared = declared;
    this.fetchImpl = fetchImpl;
  }

  /** One call; resolves to {ok: true, value} (wire JSON) or {ok: false, message}. */
  async call(moduleKey, exportName, args, deadline) {
    const spec = this.declared.get(moduleKey);
    if (!spec) return { ok: false, message: `${debugString(moduleKey)} is not a host sandbox module declared by this node` };
    if (!spec.exports.includes(exportName)) {
      return { ok: false, message: `${moduleKey} has no export named ${debugString(exportName)}` };
    }
    const url = `/api/host-modules/${encodeURIComponent(spec.id)}/${encodeURIComponent(exportName)}`;
    const body = JSON.stringify({ args });
    for (;;) {
      const left = deadline - Date.now();
      if (left <= 0) return { ok: false, message: `${spec.id}.${exportName}: the run's deadline passed before the host answered` };
      const abort = new AbortController();
      const timer = setTimeout(() => abort.abort(), left);
      let response;
      try {
        response = await this.fetchImpl(url, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body,
          signal: abort.signal,
          credentials: "same-origin",
        });
      } catch (e) {
        clearTimeout(timer);
        if (abort.signal.aborted) return { ok: false, message: `${spec.id}.${exportName}: the run's deadline passed before the host answered` };
        return { ok: false, message: `${spec.id}.${exportName}: the host could not be reached: ${e.message}` };
      }
      clearTimeout(timer);
      let answer = null;
      try {
        answer = await response.json();
      } catch (_) {
        answer = null;
      }
      if (response.status === 200 && answer && "result" in answer) return { ok: true, value: answer.result };
      if (response.status === 503) {
        // The server's run gate is full: wait as it asks, within the run's deadline.
        const seconds = Number(response.headers.get("retry-after")) || 1;
        await sleep(Math.min(seconds * 1000, Math.max(0, deadline - Date.now())));
        continue;
      }
      const detail = answer && typeof answer.detail === "string" ? answer.detail : `HTTP ${response.status}`;
      return { ok: false, message: detail };
    }
  }
}
