// WASM modules in the page's WebAssembly: a port of wasm-host/src/lib.rs and the contract
// check of runtime/src/wasm_contract.rs. Every binary is re-validated against the scalar
// contract before first use (no imports, a bounded unshared memory at most memoryPagesMax,
// declared exports that are functions of at most 8 i32/f32/f64 parameters and one result),
// each call gets a fresh instance with an empty import object, arguments are converted
// exactly (never by WebAssembly's own coercion), and the per-invocation budgets hold: calls,
// aggregate wall clock with reserve-and-refund, and a per-call timeout. Calls run in a worker
// so a runaway export can be stopped: at its timeout the worker is terminated and replaced.

export const WASM_BUDGETS = {
  callConcurrency: 2,
  callsPerInvocation: 256,
  wallClockMs: 30000,
  callTimeoutMs: 5000,
};
const WASM_MAX_ARITY = 8;
const WASM_MAX_RESULTS = 1;
const WASM_MAX_MEMORY_PAGES = 4096;
const IDENTIFIER = /^[A-Za-z_$][A-Za-z0-9_$]*$/;

const TYPES = { 0x7f: "i32", 0x7e: "i64", 0x7d: "f32", 0x7c: "f64", 0x7b: "v128", 0x70: "funcref", 0x6f: "externref" };
const KINDS = ["function", "table", "memory", "global", "tag"];

/** Reads the sections the contract needs. Throws Error("invalid WASM binary: ...") on a malformed one. */
export function readWasm(bytes) {
  let at = 0;
  const fail = (why) => {
    throw new Error(`invalid WASM binary: ${why}`);
  };
  const byte = () => {
    if (at >= bytes.length) fail("unexpected end");
    return bytes[at++];
  };
  const u32 = () => {
    let result = 0;
    let shift = 0;
    for (;;) {
      const b = byte();
      result += (b & 0x7f) * 2 ** shift;
      if (!(b & 0x80)) break;
      shift += 7;
      if (shift > 35) fail("integer too long");
    }
    return result;
  };
  const name = () => {
    const length = u32();
    if (at + length > bytes.length) fail("unexpected end");
    const text = new TextDecoder().decode(bytes.subarray(at, at + length));
    at += length;
    return text;
  };
  if (bytes.length < 8 || bytes[0] !== 0 || bytes[1] !== 0x61 || bytes[2] !== 0x73 || bytes[3] !== 0x6d) fail("magic header not detected");
  if (bytes[4] !== 1 || bytes[5] !== 0 || bytes[6] !== 0 || bytes[7] !== 0) fail("unknown binary version");
  at = 8;
  const out = { types: [], imports: [], functions: [], memories: [], exports: new Map() };
  while (at < bytes.length) {
    const id = byte();
    const size = u32();
    const end = at + size;
    if (end > bytes.length) fail("section extends past the end");
    if (id === 1) {
      const count = u32();
      for (let i = 0; i < count; i++) {
        const form = byte();
        if (form !== 0x60) {
          // A non-function type (GC proposal): it has no scalar signature.
          out.types.push(null);
          at = end;
          break;
        }
        const params = [];
        for (let n = u32(); n > 0; n--) params.push(TYPES[byte()] || "an unknown type");
        const results = [];
        for (let n = u32(); n > 0; n--) results.push(TYPES[byte()] || "an unknown type");
        out.types.push({ params, results });
      }
    } else if (id === 2) {
      const count = u32();
      if (count > 0) {
        const module = name();
        const field = name();
        out.imports.push(`${module}.${field}`);
      }
      for (let i = 1; i < count; i++) out.imports.push("");
    } else if (id === 3) {
      for (let n = u32(); n > 0; n--) out.functions.push(u32());
    } else if (id === 5) {
      for (let n = u32(); n > 0; n--) {
        const flags = u32();
        const initial = u32();
        const maximum = flags & 1 ? u32() : null;
        out.memories.push({ shared: !!(flags & 2), memory64: !!(flags & 4), customPage: !!(flags & 8), initial, maximum });
      }
    } else if (id === 7) {
      for (let n = u32(); n > 0; n--) {
        const exportName = name();
        const kind = byte();
        const index = u32();
        out.exports.set(exportName, { kind, index });
      }
    }
    at = end;
  }
  return out;
}

function typeViolation(t) {
  if (t === "i32" || t === "f32" || t === "f64") return null;
  if (t === "i64") return "uses i64, which maps to bigint rather than number";
  if (t === "v128") return "uses v128, a vector type";
  if (t === "funcref" || t === "externref") return `uses the reference type ${t}`;
  return `uses ${t}, which is not i32, f32, or f64`;
}

function signatureViolation(f) {
  if (f.params.length > WASM_MAX_ARITY) return `takes ${f.params.length} parameters, above the ${WASM_MAX_ARITY} the scalar contract allows`;
  if (f.results.length > WASM_MAX_RESULTS) return `returns ${f.results.length} values (multi-value), and the scalar contract allows at most one`;
  for (let i = 0; i < f.params.length; i++) {
    const why = typeViolation(f.params[i]);
    if (why) return `takes parameter ${i + 1} that ${why}`;
  }
  for (const r of f.results) {
    const why = typeViolation(r);
    if (why) return `returns a value that ${why}`;
  }
  return null;
}

/** Checks a binary against its contract: the signature per declared export, or throws. */
export function checkWasm(specifier, bytes, contract) {
  const errors = [];
  if (!contract || !Number.isInteger(contract.memoryPagesMax) || !Array.isArray(contract.exports)) {
    throw new Error(`${specifier}: the WASM contract is malformed`);
  }
  for (const e of contract.exports) {
    if (!e || typeof e.wasm !== "string" || typeof e.as !== "string" || !IDENTIFIER.test(e.as)) {
      throw new Error(`${specifier}: the WASM contract names an export that is not an identifier`);
    }
  }
  let binary;
  try {
    binary = readWasm(bytes);
  } catch (e) {
    throw new Error(`${specifier}: ${e.message}`);
  }
  if (binary.imports.length) {
    errors.push(`WASM imports are not allowed${binary.imports[0] ? ` (it imports ${binary.imports[0]})` : ""}`);
  }
  binary.memories.forEach((m, index) => {
    let rule = null;
    if (m.shared) rule = "is shared; every WASM memory must be unshared";
    else if (m.memory64) rule = "is a 64-bit memory, which the scalar contract does not allow";
    else if (m.customPage) rule = "uses a custom page size, which the scalar contract does not allow";
    else if (m.maximum === null) rule = "declares no maximum; every WASM memory must declare one";
    else if (m.maximum < m.initial) rule = `has maximum ${m.maximum} below its minimum ${m.initial}`;
    else if (m.maximum > contract.memoryPagesMax || m.maximum > WASM_MAX_MEMORY_PAGES) {
      rule = `has maximum ${m.maximum} pages, above the manifest's memoryPagesMax ${contract.memoryPagesMax} (host ceiling ${WASM_MAX_MEMORY_PAGES})`;
    }
    if (rule) errors.push(`memory ${index} ${rule}`);
  });
  const signatures = new Map();
  if (!binary.imports.length) {
    for (const e of contract.exports) {
      const found = binary.exports.get(e.wasm);
      let rule = null;
      if (!found) rule = "is missing from the binary";
      else if (found.kind !== 0) rule = `is a ${KINDS[found.kind] || "kind of export"}, not a function`;
      else {
        const t = binary.types[binary.functions[found.index]];
        if (!t) rule = "has no signature in the binary";
        else rule = signatureViolation(t);
        if (!rule) signatures.set(e.as, { wasm: e.wasm, params: t.params, result: t.results[0] || null });
      }
      if (rule) errors.push(`export ${e.wasm} ${rule}`);
    }
  }
  if (errors.length) throw new Error(`${specifier}: ${errors.join("; ")}`);
  return signatures;
}

function describe(value) {
  if (typeof value === "number") {
    if (Number.isNaN(value)) return "NaN";
    if (!Number.isFinite(value)) return value > 0 ? "Infinity" : "-Infinity";
    if (!Number.isInteger(value)) return `the non-integer ${value}`;
    return String(value);
  }
  if (value === null) return "null";
  if (value === undefined) return "a undefined value";
  if (Array.isArray(value)) return "an array";
  if (typeof value === "boolean") return "a boolean value";
  if (typeof value === "string") return "a string value";
  return "a object value";
}

/** Exact argument conversion: arity, numbers only, i32 in range without wrapping. */
function convert(specifier, alias, sig, args) {
  if (args.length !== sig.params.length) {
    const plural = sig.params.length === 1 ? "argument" : "arguments";
    throw new Error(`${specifier}: ${alias} takes ${sig.params.length} ${plural}, received ${args.length}`);
  }
  return args.map((n, i) => {
    const index = i + 1;
    const ty = sig.params[i];
    if (typeof n !== "number") throw new Error(`${specifier}: ${alias} argument ${index} expects ${ty}, received ${describe(n)}`);
    if (ty === "i32") {
      if (!Number.isFinite(n) || !Number.isInteger(n)) throw new Error(`${specifier}: ${alias} argument ${index} expects i32, received ${describe(n)}`);
      if (n < -2147483648 || n > 2147483647) throw new Error(`${specifier}: ${alias} argument ${index} expects i32 in the range -2147483648…2147483647, received ${n}`);
    }
    return n;
  });
}

/** Compiled modules by the SHA-256 of their bytes and contract (the page's cache). */
const compiled = new Map();

/** The executor: one worker running one call at a time, replaced when a call overruns. */
class Executor {
  constructor(workerUrl) {
    this.workerUrl = workerUrl;
    this.worker = null;
    this.next = 0;
  }

  call(module, exportName, args, timeoutMs) {
    if (!this.worker) this.worker = new Worker(this.workerUrl, { type: "module" });
    const worker = this.worker;
    const id = ++this.next;
    return new Promise((resolve) => {
      let timer = null;
      const done = (outcome) => {
        clearTimeout(timer);
        worker.removeEventListener("message", onMessage);
        worker.removeEventListener("error", onError);
        resolve(outcome);
      };
      const onMessage = (event) => {
        if (event.data && event.data.id === id) done(event.data);
      };
      const onError = (event) => {
        event.preventDefault();
        this.kill(worker);
        done({ trap: `the WASM worker failed: ${event.message || "unknown error"}` });
      };
      worker.addEventListener("message", onMessage);
      worker.addEventListener("error", onError);
      timer = setTimeout(() => {
        this.kill(worker);
        done({ timeout: true });
      }, Math.max(1, timeoutMs));
      worker.postMessage({ id, module, exportName, args });
    });
  }

  kill(worker) {
    worker.terminate();
    if (this.worker === worker) this.worker = null;
  }

  close() {
    if (this.worker) this.kill(this.worker);
  }
}

/** The per-run dispatcher behind the generated WASM facades, or null when none is declared. */
export async function wasmDispatcherFor(modules, { workerUrl, sha256Hex }) {
  const declared = new Map();
  const budgets = { ...WASM_BUDGETS };
  for (const m of modules) {
    if (m.kind !== "wasm") continue;
    const file = m.graph.find((f) => f.id === m.moduleId);
    if (!file || !file.bytes) throw new Error(`${m.specifier}: the resolution carries no WASM bytes`);
    const key = (file.sha256 || (await sha256Hex(file.bytes))) + JSON.stringify(m.wasm);
    let entry = compiled.get(key);
    if (!entry) {
      const signatures = checkWasm(m.specifier, file.bytes, m.wasm);
      let module;
      try {
        module = await WebAssembly.compile(file.bytes);
      } catch (e) {
        throw new Error(`${m.specifier}: the WASM module does not compile: ${e.message}`);
      }
      if (WebAssembly.Module.imports(module).length) {
        throw new Error(`${m.specifier}: the WASM module cannot be instantiated without imports`);
      }
      entry = { module, signatures };
      compiled.set(key, entry);
    }
    const limits = m.wasm.limits || {};
    if (limits.callConcurrency) budgets.callConcurrency = Math.min(budgets.callConcurrency, Math.max(1, limits.callConcurrency));
    if (limits.callsPerInvocation) budgets.callsPerInvocation = Math.min(budgets.callsPerInvocation, limits.callsPerInvocation);
    if (limits.wallClockMs) budgets.wallClockMs = Math.min(budgets.wallClockMs, limits.wallClockMs);
    declared.set(m.specifier, { ...entry, callTimeoutMs: limits.callTimeoutMs || WASM_BUDGETS.callTimeoutMs });
  }
  if (!declared.size) return null;
  return new WasmDispatcher(declared, budgets, new Executor(workerUrl));
}

class WasmDispatcher {
  constructor(declared, budgets, executor) {
    this.declared = declared;
    this.budgets = budgets;
    this.executor = executor;
    this.calls = 0;
    this.wallUsed = 0;
    // Calls run one at a time, in order (as in the Rust host, where one run's calls never
    // overlap): the queue is this promise chain.
    this.queue = Promise.resolve();
  }

  /** One call; resolves to {ok: true, value} or {ok: false, message}. `args` are host values. */
  call(specifier, alias, args, deadline) {
    const run = this.queue.then(() => this.run(specifier, alias, args, deadline));
    this.queue = run.catch(() => {});
    return run.then(
      (value) => ({ ok: true, value }),
      (e) => ({ ok: false, message: e.message }),
    );
  }

  async run(specifier, alias, args, deadline) {
    const declared = this.declared.get(specifier);
    if (!declared) throw new Error(`"${specifier}" is not a WASM sandbox module this run serves`);
    const sig = declared.signatures.get(alias);
    if (!sig) throw new Error(`${specifier} has no export named "${alias}"`);
    const params = convert(specifier, alias, sig, args);
    const limits = this.budgets;
    if (this.calls >= limits.callsPerInvocation) {
      throw new Error(`${specifier}: this node exhausted its budget of ${limits.callsPerInvocation} WASM calls per invocation`);
    }
    this.calls++;
    const remaining = limits.wallClockMs - this.wallUsed;
    if (remaining <= 0) {
      throw new Error(`${specifier}: this node exhausted its budget of ${limits.wallClockMs} ms of WASM wall clock per invocation`);
    }
    const runLeft = Math.max(1, deadline - Date.now());
    const reserved = Math.min(declared.callTimeoutMs, remaining, runLeft);
    this.wallUsed += reserved;
    const started = performance.now();
    const outcome = await this.executor.call(declared.module, sig.wasm, params, reserved);
    const elapsed = performance.now() - started;
    const charged = outcome.timeout ? Math.max(reserved, elapsed) : Math.min(elapsed, reserved);
    this.wallUsed = this.wallUsed - reserved + charged;
    if (outcome.timeout) {
      throw new Error(`WASM call ${sig.wasm} exceeded its ${Math.round(reserved)} ms per-call timeout; the instance was stopped and discarded`);
    }
    if (outcome.trap !== undefined) throw new Error(`${specifier}: ${alias} trapped: ${outcome.trap}`);
    return outcome.value === null ? undefined : outcome.value;
  }

  close() {
    this.executor.close();
  }
}
