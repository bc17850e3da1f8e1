// One run in the browser: a port of guest/src/run.rs, loader.rs and bridge.rs onto QuickJS
// (quickjs-ng) compiled to WebAssembly (quickjs-emscripten-core with the
// @jitl/quickjs-ng-wasmfile-release-sync variant).
//
// A fresh runtime and context per run with the memory limit, a stack limit and an interrupt
// handler on the deadline; the hardening prelude before anything else; the private bridges
// evaluated before any pack or body code exists (so no global ever holds a dispatcher); the
// entry compiled with its whole static graph resolved through the normalizer, then the
// normalizer locked, and only then anything evaluated: every later request is a refused
// dynamic import. The normalizer decides every request (QuickJS consults it even for a module
// already loaded); a refusal becomes a module name whose load throws the refusal's message.

import { newQuickJSWASMModuleFromVariant, newVariant } from "quickjs-emscripten-core";
import baseVariant from "@jitl/quickjs-ng-wasmfile-release-sync";

import { ENTRY_LINE_OFFSET, ENTRY_MODULE_NAME } from "./entry.js";
import { HOST_BRIDGE_SPECIFIER, WASM_BRIDGE_SPECIFIER, hostFacadeSource, hostModule, wasmFacadeSource } from "./facade.js";
import { debugString } from "./host.js";
import { PRELUDE, PRELUDE_NAME } from "./prelude.js";
import { installStandardGlobals } from "./standard-globals.js";
import { explainLinkError } from "./exports.js";
import { isRelative, joinRelative, relativeCandidates } from "./relative.js";
import { onThrow, shortStack } from "./caret.js";

/** NodeTool's standard limits (guest/src/lib.rs RunLimits::STANDARD). */
export const STANDARD_LIMITS = Object.freeze({
  timeoutMs: 30000,
  memoryBytes: 64 * 1024 * 1024,
  stackBytes: 512 * 1024,
  logEntries: 1000,
  logChars: 10000,
});

/**
 * The stack QuickJS may use in the browser. The engine's frames live in WebAssembly, whose
 * native frames on the page's thread are several times larger than QuickJS's own count, and
 * a browser thread has about 1 MiB of native stack: at 512 KiB of engine stack the browser's
 * own "Maximum call stack size exceeded" would strike first, inside the engine, and leave it
 * unusable. At 256 KiB the engine's check always strikes first (a host overflow is still
 * caught, reported as stack-overflow, and the engine is replaced).
 */
export const ENGINE_STACK_BYTES = 256 * 1024;

const MODULE_PREFIX = "nodetool-sandbox:";
const DENIED_PREFIX = "nodetool-sandbox:denied#";
const RUNNER_NAME = "nodetool-sandbox:run";
const BRIDGE_GLOBAL = "__nodetoolBridgeInstall";
const MAX_REMEMBERED = 64;
const MAX_PENDING_CALLS = 1024;

// ------------------------------------------------------------------ the engine

let enginePromise = null;
let wasmModulePromise = null;

/** The page's QuickJS WebAssembly module, compiled once; an engine is an instance of it. */
export function engine(wasmUrl) {
  if (!enginePromise) {
    if (!wasmModulePromise) {
      wasmModulePromise = WebAssembly.compileStreaming(fetch(wasmUrl)).catch((e) => {
        wasmModulePromise = null;
        throw e;
      });
    }
    enginePromise = wasmModulePromise
      .then((wasmModule) => newQuickJSWASMModuleFromVariant(newVariant(baseVariant, { wasmModule })))
      .catch((e) => {
        enginePromise = null;
        throw e;
      });
  }
  return enginePromise;
}

/** Drops the current engine (its memory may be corrupt); the next run instantiates a new one. */
function discardEngine() {
  enginePromise = null;
}

// ------------------------------------------------------------------ outcomes

export function runError(code, message, extra = {}) {
  const error = { code, message };
  for (const key of ["line", "column", "specifier"]) if (extra[key] !== undefined && extra[key] !== null) error[key] = extra[key];
  return error;
}

class Logs {
  constructor(maxEntries, maxChars) {
    this.entries = [];
    this.dropped = 0;
    this.maxEntries = maxEntries;
    this.maxChars = maxChars;
  }

  push(level, message) {
    if (this.entries.length >= this.maxEntries) {
      this.dropped++;
      return;
    }
    const chars = [...message];
    if (chars.length > this.maxChars) message = `${chars.slice(0, this.maxChars).join("")}… [truncated]`;
    this.entries.push({ level, message });
  }

  finish() {
    if (this.dropped > 0) {
      this.entries.push({
        level: "warn",
        message: `… ${this.dropped} more console lines were dropped (the cap is ${this.maxEntries} per run)`,
      });
    }
    return this.entries;
  }
}

/** The body position of the innermost stack frame in the entry module. */
function bodyPosition(stack) {
  const marker = `${ENTRY_MODULE_NAME}:`;
  for (const frame of String(stack || "").split("\n")) {
    let at = frame.indexOf(`(${marker}`);
    if (at >= 0) at += 1;
    else {
      at = frame.indexOf(` ${marker}`);
      if (at < 0) continue;
      at += 1;
    }
    const parts = frame.slice(at + marker.length).replace(/\)\s*$/, "").split(":");
    const line = Number.parseInt(parts[0], 10);
    const column = Number.parseInt(parts[1], 10);
    // The entry's first line holds only the hoisted imports and the wrapper's head. quickjs-ng
    // 0.12 (the version the registry's WebAssembly build vendors) reports an error thrown in a
    // variable declaration's initializer at the start of the enclosing function, which for
    // the body is that line: a position known to be wrong is left out rather than reported.
    if (line === ENTRY_LINE_OFFSET) return {};
    if (Number.isFinite(line)) {
      return { line: Math.max(1, line - ENTRY_LINE_OFFSET), column: Number.isFinite(column) ? column : undefined };
    }
  }
  return {};
}

// ------------------------------------------------------------------ the loader

function packFileName(pack, fileId) {
  return `${MODULE_PREFIX}${pack}|${fileId}`;
}

/** The run's module table: what each engine module name stands for (loader.rs ModuleTable). */
class ModuleTable {
  constructor(modules) {
    this.specifiers = new Map();
    this.bodies = new Map();
    this.locked = false;
    this.denials = [];
    this.deniedNames = new Map();
    this.nextDenied = 0;
    for (const m of modules) {
      const pack = m.packName;
      for (const file of m.graph) {
        if (typeof file.source === "string") {
          this.bodies.set(packFileName(pack, file.id), { kind: "pack", pack, fileId: file.id, source: file.source });
        }
      }
      let name;
      if (m.kind === "js") name = packFileName(pack, m.moduleId);
      else if (m.kind === "wasm") {
        name = packFileName(pack, `wasm:${m.moduleId}`);
        this.bodies.set(name, { kind: "facade", bridge: "wasm", source: wasmFacadeSource(m.specifier, m.wasm.exports) });
      } else {
        name = packFileName(pack, `host:${m.hostId}`);
        const spec = hostModule(m.hostId);
        this.bodies.set(name, { kind: "facade", bridge: "host", source: hostFacadeSource(m.specifier, spec ? spec.exports : []) });
      }
      this.specifiers.set(m.specifier, name);
    }
  }

  /** The engine name `name` resolves to from `base`, or {code, message}. */
  resolveName(base, name) {
    if (base === RUNNER_NAME && name === ENTRY_MODULE_NAME) return { name };
    if (this.locked) {
      return { code: "dynamic-import-denied", message: `dynamic import() is not allowed in the sandbox (requested "${name}")` };
    }
    for (const [specifier, bridge, kind] of [
      [HOST_BRIDGE_SPECIFIER, "host", "host"],
      [WASM_BRIDGE_SPECIFIER, "wasm", "WASM"],
    ]) {
      if (name === specifier) {
        const body = this.bodies.get(base);
        if (body && body.kind === "facade" && body.bridge === bridge) return { name };
        return {
          code: "module-denied",
          message: `"${name}" is private to the sandbox's generated ${kind} facades and cannot be imported`,
        };
      }
    }
    const target = this.specifiers.get(name);
    if (target !== undefined) return { name: target };
    const body = this.bodies.get(base);
    if (isRelative(name) && body && body.kind === "pack") {
      const joined = joinRelative(body.fileId, name);
      if (joined !== null) {
        for (const candidate of relativeCandidates(joined)) {
          const engineName = packFileName(body.pack, candidate);
          const found = this.bodies.get(engineName);
          if (found && found.kind === "pack") return { name: engineName };
        }
      }
      return { code: "module-denied", message: `"${name}" is not a file of the ${body.pack} sandbox package` };
    }
    return {
      code: "module-denied",
      message: `"${name}" is not a sandbox package this run serves — only an installed pack the code imports resolves`,
    };
  }

  normalize(base, name) {
    const resolved = this.resolveName(base, name);
    if (resolved.name !== undefined) return resolved.name;
    if (this.denials.length >= MAX_REMEMBERED) this.denials.shift();
    this.denials.push({ code: resolved.code, specifier: name, message: resolved.message });
    const denied = `${DENIED_PREFIX}${++this.nextDenied}`;
    this.deniedNames.set(denied, resolved.message);
    return denied;
  }

  load(name) {
    const denial = this.deniedNames.get(name);
    if (denial !== undefined) return { error: new Error(denial) };
    const body = this.bodies.get(name);
    if (body) return body.source;
    return { error: new Error(`Module "${name}" is not available`) };
  }
}

// ------------------------------------------------------------------ one run

/**
 * Runs a body whose modules are already resolved and verified.
 * `request`: {code, entry (from buildEntry), modules, inputs (wire JSON), secrets?, limits,
 * dispatchers: {host, wasm}, signal?}. Returns {result: {ok, value}|{ok: false, error}, logs, durationMs}.
 */
export async function execute(request, { wasmUrl }) {
  const started = performance.now();
  const limits = request.limits;
  const logs = new Logs(limits.logEntries, limits.logChars);
  let result;
  try {
    result = await executeIn(await engine(wasmUrl), request, logs);
    if (!result.ok) result.error = explainLinkError(result.error, request.code, request.modules);
  } catch (e) {
    // Something failed in the engine itself rather than in guest code: the browser's own
    // stack limit inside the engine, or a broken engine. Its state cannot be trusted again.
    discardEngine();
    if (e && e.name === "RangeError" && /call stack/i.test(String(e.message))) {
      result = { ok: false, error: runError("stack-overflow", "the run exceeded its stack (too much recursion)") };
    } else {
      result = { ok: false, error: runError("runtime-error", `the sandbox failed: ${e && e.message ? e.message : String(e)}`) };
    }
  }
  return { result, logs: logs.finish(), durationMs: Math.round(performance.now() - started) };
}

async function executeIn(quickjs, request, logs) {
  const limits = request.limits;
  const deadline = Date.now() + limits.timeoutMs;
  let stop = null;
  const stopped = (reason) =>
    reason === "cancelled"
      ? runError("cancelled", "the run was cancelled")
      : runError("timeout", `the run exceeded its ${limits.timeoutMs} ms deadline`);

  const runtime = quickjs.newRuntime();
  const handles = [];
  const pending = [];
  let context = null;
  let poisoned = false;
  try {
    runtime.setMemoryLimit(limits.memoryBytes);
    runtime.setMaxStackSize(ENGINE_STACK_BYTES);
    runtime.setInterruptHandler(() => {
      if (stop) return true;
      if (request.signal && request.signal.aborted) stop = "cancelled";
      else if (Date.now() >= deadline) stop = "deadline";
      return stop !== null;
    });
    const table = new ModuleTable(request.modules);
    runtime.setModuleLoader(
      (name) => table.load(name),
      (base, name) => table.normalize(base, name),
    );
    context = runtime.newContext();
    const ctx = context;
    const keep = (h) => {
      handles.push(h);
      return h;
    };

    const thrown = [];
    const rememberThrown = (message, code) => {
      if (thrown.length >= MAX_REMEMBERED) thrown.shift();
      thrown.push({ message, code });
    };

    // The prelude: hardening, then the helpers it returns.
    const preludeResult = ctx.evalCode(PRELUDE, PRELUDE_NAME);
    if (preludeResult.error) {
      keep(preludeResult.error);
      return { ok: false, error: runError("runtime-error", "the sandbox could not start: its prelude failed") };
    }
    const helpers = keep(preludeResult.value);
    const helper = {};
    for (const name of ["cross", "crossArgs", "revive", "newError", "setMessage", "installConsole", "installInputs", "installGetSecret", "errorInfo"]) {
      helper[name] = keep(ctx.getProp(helpers, name));
    }
    /** Calls a helper; returns {value} (a handle the caller owns) or {error} (a handle). */
    const call = (name, ...args) => ctx.callFunction(helper[name], ctx.undefined, ...args);
    const string = (text) => keep(ctx.newString(text));

    // Classifies a thrown guest value (run.rs classify_value).
    const classify = (errorHandle) => {
      const infoResult = call("errorInfo", errorHandle);
      let info = { name: "", message: undefined, stack: "", described: "" };
      if (infoResult.error) {
        infoResult.error.dispose();
      } else {
        info = ctx.dump(infoResult.value);
        infoResult.value.dispose();
      }
      const name = info.name || "";
      const message = typeof info.message === "string" ? info.message : info.described;
      if (stop && (message.includes("interrupted") || name === "InternalError")) return stopped(stop);
      if (name === "InternalError" && message === "out of memory") return runError("memory-limit", "the run exceeded its memory limit");
      if (name === "InternalError" && message === "string too long") {
        return runError("memory-limit", "the run built a string longer than the engine allows");
      }
      if (message === "Maximum call stack size exceeded" || (name === "InternalError" && message === "stack overflow")) {
        return runError("stack-overflow", "the run exceeded its stack (too much recursion)");
      }
      const position = bodyPosition(info.stack);
      for (let i = table.denials.length - 1; i >= 0; i--) {
        const denial = table.denials[i];
        if (denial.message === message) {
          return runError(denial.code, denial.message, { ...position, specifier: denial.specifier });
        }
      }
      for (let i = thrown.length - 1; i >= 0; i--) {
        if (thrown[i].message === message) return runError(thrown[i].code, info.described, position);
      }
      const error = runError("runtime-error", info.described, onThrow(request.code, position));
      const stack = shortStack(info.stack, request.code);
      if (stack.length) error.stack = stack;
      return error;
    };
    const fail = (errorHandle) => {
      const error = classify(errorHandle);
      errorHandle.dispose();
      return { ok: false, error };
    };

    // Globals: console, inputs, granted capabilities.
    const sink = keep(
      ctx.newFunction("sink", (level, text) => {
        logs.push(ctx.getString(level), ctx.getString(text));
      }),
    );
    for (const [name, arg] of [
      ["installConsole", sink],
      ["installInputs", string(JSON.stringify(request.inputs === undefined ? null : request.inputs))],
      ...(request.secrets ? [["installGetSecret", string(JSON.stringify(request.secrets))]] : []),
    ]) {
      const r = call(name, arg);
      if (r.error) return fail(r.error);
      r.value.dispose();
    }

    const standard = installStandardGlobals(ctx, { keep, pending, deadline });
    if (standard) return fail(standard);

    // The private bridges, evaluated now, before any pack or body code exists.
    const sides = {
      host: { dispatcher: request.dispatchers.host, keys: new Set(), code: "host-module-error", label: "host" },
      wasm: { dispatcher: request.dispatchers.wasm, keys: new Set(), code: "wasm-error", label: "WASM" },
    };
    for (const m of request.modules) {
      if (m.kind === "host") sides.host.keys.add(m.specifier);
      if (m.kind === "wasm") sides.wasm.keys.add(m.specifier);
    }
    const describeValue = (h) => {
      const type = ctx.typeof(h);
      return type === "string" ? debugString(ctx.getString(h)) : `a ${type} value`;
    };
    const bridgeCall = (side) => (keyH, exportH, argsH) => {
      const deferred = ctx.newPromise();
      const refuse = (message) => {
        rememberThrown(message, side.code);
        const error = ctx.newError(message);
        deferred.reject(error);
        error.dispose();
        return deferred.handle;
      };
      const key = keyH && ctx.typeof(keyH) === "string" ? ctx.getString(keyH) : null;
      if (key === null || !side.keys.has(key)) {
        return refuse(`${keyH ? describeValue(keyH) : "a undefined value"} is not a ${side.label} sandbox module this run serves`);
      }
      if (!exportH || ctx.typeof(exportH) !== "string") {
        return refuse(`${key} has no export named ${exportH ? describeValue(exportH) : "a undefined value"}`);
      }
      const exportName = ctx.getString(exportH);
      const crossed = call("crossArgs", argsH || ctx.undefined, side === sides.wasm ? ctx.true : ctx.false);
      if (crossed.error) {
        // An interrupt (or a failure of the walk itself) while reading the arguments.
        deferred.reject(crossed.error);
        crossed.error.dispose();
        return deferred.handle;
      }
      const answer = ctx.dump(crossed.value);
      crossed.value.dispose();
      if (!answer.ok) {
        if (answer.notList) return refuse(`${key}: ${exportName} was called with a non-list argument`);
        return refuse(`${key}: ${exportName}: ${answer.message}`);
      }
      if (!side.dispatcher) return refuse(`${key}: no ${side.label} dispatcher is available in this run`);
      if (pending.length >= MAX_PENDING_CALLS) {
        return refuse(`${key}: ${exportName}: ${MAX_PENDING_CALLS} calls are already in flight in this run; await some before starting more`);
      }
      const made = call("newError");
      const error = made.error ? ctx.newError("") : made.value;
      if (made.error) made.error.dispose();
      const args = JSON.parse(answer.text, (_, v) =>
        v && typeof v === "object" && !Array.isArray(v) && typeof v.$nodetoolNumber === "string" && Object.keys(v).length === 1
          ? Number(v.$nodetoolNumber)
          : v,
      );
      const entry = { side, deferred, error, done: false, outcome: null };
      entry.promise = Promise.resolve(side.dispatcher.call(key, exportName, args, deadline)).then(
        (outcome) => {
          entry.done = true;
          entry.outcome = outcome;
        },
        (e) => {
          entry.done = true;
          entry.outcome = { ok: false, message: e && e.message ? e.message : String(e) };
        },
      );
      pending.push(entry);
      return deferred.handle;
    };
    const global = ctx.global;
    for (const [specifier, side] of [
      [HOST_BRIDGE_SPECIFIER, sides.host],
      [WASM_BRIDGE_SPECIFIER, sides.wasm],
    ]) {
      const fn = keep(ctx.newFunction("__call", bridgeCall(side)));
      ctx.setProp(global, BRIDGE_GLOBAL, fn);
      const evaluated = ctx.evalCode(
        `const call = globalThis.${BRIDGE_GLOBAL}; delete globalThis.${BRIDGE_GLOBAL};\nexport function __call(key, name, args) { return call(key, name, args); }\n`,
        specifier,
        { type: "module" },
      );
      if (evaluated.error) return fail(evaluated.error);
      evaluated.value.dispose();
    }
    runtime.executePendingJobs();

    // The entry: compile it with its whole static graph resolved, lock, then evaluate.
    const compiled = ctx.evalCode(request.entry.source, ENTRY_MODULE_NAME, { type: "module", compileOnly: true });
    if (compiled.error) return compileFailure(ctx, compiled.error, request, table, classify, stop, stopped);
    compiled.value.dispose();
    table.locked = true;
    const evaluation = ctx.evalCode(`import value from "${ENTRY_MODULE_NAME}";\nexport default value;\n`, RUNNER_NAME, { type: "module" });
    if (evaluation.error) return fail(evaluation.error);
    const promise = keep(evaluation.value);

    // The event loop.
    for (;;) {
      for (;;) {
        if (stop) break;
        const jobs = runtime.executePendingJobs();
        if (jobs.error) {
          // A job that throws rejects the promise it belongs to; the outcome comes from the
          // entry's promise, so nothing is lost by moving on.
          jobs.error.dispose();
          continue;
        }
        if (jobs.value === 0) break;
      }
      const state = ctx.getPromiseState(promise);
      if (state.type === "fulfilled") {
        const namespace = state.value;
        const value = ctx.getProp(namespace, "default");
        namespace.dispose();
        const crossed = call("cross", value, string("the result"), keep(ctx.newNumber(64 * 1024 * 1024)), ctx.false);
        value.dispose();
        if (crossed.error) {
          if (stop) {
            crossed.error.dispose();
            return { ok: false, error: stopped(stop) };
          }
          return fail(crossed.error);
        }
        const answer = ctx.dump(crossed.value);
        crossed.value.dispose();
        if (!answer.ok) {
          if (stop) return { ok: false, error: stopped(stop) };
          return { ok: false, error: runError("runtime-error", answer.message) };
        }
        return { ok: true, value: JSON.parse(answer.text) };
      }
      if (state.type === "rejected") return fail(state.error);
      if (stop) return { ok: false, error: stopped(stop) };

      // Settle the host calls that finished.
      let progressed = false;
      for (let i = 0; i < pending.length; ) {
        const entry = pending[i];
        if (!entry.done) {
          i++;
          continue;
        }
        pending.splice(i, 1);
        progressed = true;
        settle(ctx, entry, call, rememberThrown);
      }
      if (progressed || runtime.hasPendingJob()) continue;
      if (!pending.length) {
        return {
          ok: false,
          error: runError("runtime-error", "the body's result never settles: it awaits a Promise that nothing will resolve"),
        };
      }
      if (request.signal && request.signal.aborted) return { ok: false, error: stopped("cancelled") };
      const left = deadline - Date.now();
      if (left <= 0) return { ok: false, error: stopped("deadline") };
      let timer = null;
      await Promise.race([
        ...pending.map((p) => p.promise),
        new Promise((resolve) => {
          timer = setTimeout(resolve, left);
        }),
      ]);
      clearTimeout(timer);
    }
  } catch (e) {
    poisoned = true;
    throw e;
  } finally {
    // Calls still pending hold guest values: release them before the context goes.
    for (const entry of pending) {
      try {
        if (entry.error.alive) entry.error.dispose();
        entry.deferred.dispose();
      } catch (_) {
        poisoned = true;
      }
    }
    for (const h of handles.reverse()) {
      try {
        if (h.alive) h.dispose();
      } catch (_) {
        poisoned = true;
      }
    }
    if (!poisoned) {
      try {
        if (context) context.dispose();
        runtime.dispose();
      } catch (_) {
        discardEngine();
      }
    } else {
      discardEngine();
    }
  }
}

/** A compile of the entry that failed: a refusal, a pack module that does not parse, or the
 * entry's own syntax error (the body was parsed already, so this is rare). */
function compileFailure(ctx, errorHandle, request, table, classify, stop, stopped) {
  const classified = classify(errorHandle);
  const stack = ctx.getProp(errorHandle, "stack");
  const nameH = ctx.getProp(errorHandle, "name");
  const messageH = ctx.getProp(errorHandle, "message");
  const stackText = ctx.typeof(stack) === "string" ? ctx.getString(stack) : "";
  const name = ctx.typeof(nameH) === "string" ? ctx.getString(nameH) : "";
  const message = ctx.typeof(messageH) === "string" ? ctx.getString(messageH) : "";
  stack.dispose();
  nameH.dispose();
  messageH.dispose();
  errorHandle.dispose();
  if (stop) return { ok: false, error: stopped(stop) };
  if (classified.code !== "runtime-error" || name !== "SyntaxError") return { ok: false, error: classified };
  // Where the engine says the syntax error is: a pack module (named by pack and file), or
  // the entry itself.
  const frame = stackText.split("\n").map((l) => l.trim()).find((l) => l.startsWith("at "));
  const location = frame ? frame.slice(3).replace(/^.*\(/, "").replace(/\)$/, "") : "";
  if (location.startsWith(MODULE_PREFIX)) {
    const file = location.slice(MODULE_PREFIX.length).replace(/:\d+:\d+$/, "").replace("|", "/");
    return { ok: false, error: runError("syntax-error", `${file}: SyntaxError: ${message}`) };
  }
  const position = bodyPosition(`(${location})`);
  return { ok: false, error: runError("syntax-error", `SyntaxError: ${message}`, position) };
}

/** Settles a finished dispatcher call in the guest (bridge.rs settle). */
function settle(ctx, entry, call, rememberThrown) {
  if (entry.settle) return entry.settle();
  const { deferred, error, side, outcome } = entry;
  let rejection = null;
  if (outcome.ok) {
    let value = null;
    if (side.label === "WASM") {
      value = typeof outcome.value === "number" ? ctx.newNumber(outcome.value) : ctx.undefined;
    } else {
      const text = ctx.newString(JSON.stringify(outcome.value === undefined ? null : outcome.value));
      const revived = call("revive", text, ctx.false);
      text.dispose();
      if (revived.error) {
        revived.error.dispose();
        rejection = "the result could not cross into the sandbox: it is nested too deeply";
      } else value = revived.value;
    }
    if (value !== null) {
      deferred.resolve(value);
      if (value.alive && value !== ctx.undefined) value.dispose();
      error.dispose();
      return;
    }
  } else {
    rejection = outcome.message;
  }
  rememberThrown(rejection, side.code);
  const messageHandle = ctx.newString(rejection);
  const updated = call("setMessage", error, messageHandle);
  messageHandle.dispose();
  if (updated.error) updated.error.dispose();
  else updated.value.dispose();
  deferred.reject(error);
  error.dispose();
}
