// A body's run end to end in the browser (the counterpart of frontend/src/run.rs): the entry
// built, the run's modules fetched and verified through the delivery route, the dispatchers
// its facades need, the QuickJS run, and the import located when the guest could not place
// an import error. The answer has the shape of `POST /api/run` (`nodetool run --json`).

import { ModuleStore, DeliveryError, isDeliverableId, sha256Hex } from "./delivery.js";
import { BodySyntaxError, bodyImports, buildEntry } from "./entry.js";
import { hostDispatcherFor } from "./host.js";
import { isSpecifier } from "./names.js";
import { STANDARD_LIMITS, execute, runError } from "./sandbox.js";
import { wasmDispatcherFor } from "./wasm.js";

function located(error, code) {
  if (error.line === undefined && error.specifier !== undefined) {
    try {
      const found = bodyImports(code).find((i) => i.specifier === error.specifier);
      if (found) return { ...error, line: found.line, column: found.column };
    } catch (_) {
      // A body that does not parse has no imports to point at.
    }
  }
  return error;
}

function answer({ result, logs, durationMs }) {
  return result.ok
    ? { ok: true, result: result.value === undefined ? null : result.value, logs, durationMs }
    : { ok: false, error: result.error, logs };
}

/**
 * A runner for one page: `run(request)` answers like `POST /api/run`.
 * request: {code, input?, timeoutMs?, secrets?, modules?, signal?}. With `modules` (a list of
 * specifiers) those are the run's resolution, as for a CodeAct step or a contract fixture;
 * without it the body's static imports are its declaration, as for a Code node.
 */
export function createRunner({ wasmUrl, wasmWorkerUrl, fetchImpl } = {}) {
  const store = new ModuleStore({ fetchImpl });
  async function run(request) {
    const code = String(request.code ?? "");
    const limits = { ...STANDARD_LIMITS };
    if (request.timeoutMs !== undefined && request.timeoutMs !== null) {
      const ms = Number(request.timeoutMs);
      if (!Number.isInteger(ms) || ms < 1 || ms > STANDARD_LIMITS.timeoutMs) {
        return { ok: false, error: runError("runtime-error", `timeoutMs must be between 1 and ${STANDARD_LIMITS.timeoutMs}`), logs: [] };
      }
      limits.timeoutMs = ms;
    }
    const fail = (error) => ({ ok: false, error: located(error, code), logs: [] });
    let entry;
    try {
      entry = buildEntry(code);
    } catch (e) {
      if (e instanceof BodySyntaxError) return fail(runError("syntax-error", e.message, { line: e.line, column: e.column }));
      throw e;
    }
    const declared = Array.isArray(request.modules)
      ? [...new Set(request.modules)]
      : [...new Set(entry.imports.map((i) => i.specifier))].filter((s) => isSpecifier(s) && isDeliverableId(s));
    let resolved;
    try {
      resolved = await store.resolve(declared, { signal: request.signal });
    } catch (e) {
      if (e instanceof DeliveryError) return fail(runError(e.code, e.message, { specifier: e.specifier }));
      throw e;
    }
    if (resolved.missing.length) {
      const first = resolved.missing[0];
      const spec = first.specifier;
      if (/is not available for delivery/.test(first.detail || "")) {
        const why = first.detail.replace(/^.*is not available for delivery: /, "");
        return fail(runError("module-unavailable", `Sandbox module ${spec} is not available for execution: ${why}`, { specifier: spec }));
      }
      return fail(runError("module-not-found", `Sandbox module ${spec} is not installed.`, { specifier: spec }));
    }
    let host;
    let wasm;
    try {
      host = hostDispatcherFor(resolved.modules, { fetchImpl });
    } catch (e) {
      return fail(runError("host-module-error", e.message));
    }
    try {
      wasm = await wasmDispatcherFor(resolved.modules, { workerUrl: wasmWorkerUrl, sha256Hex });
    } catch (e) {
      return fail(runError("wasm-error", e.message));
    }
    try {
      const outcome = await execute(
        {
          code,
          entry,
          modules: resolved.modules,
          inputs: request.input === undefined ? {} : request.input,
          secrets: request.secrets,
          limits,
          dispatchers: { host, wasm },
          signal: request.signal,
        },
        { wasmUrl },
      );
      if (!outcome.result.ok) outcome.result.error = located(outcome.result.error, code);
      return answer(outcome);
    } finally {
      if (wasm) wasm.close();
    }
  }
  return { run, store };
}
