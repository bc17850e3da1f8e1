// The standard web globals of a run in the browser: guest/src/globals.rs's native ops over the
// browser's own TextEncoder/TextDecoder, atob/btoa, crypto, URL and URLSearchParams, handed to
// the shared script (globals.js, the text of guest/src/globals.js), which gives both runtimes
// one API shape and one set of error messages. The natives reach the guest only through the
// script's closures; no global holds one.

import { GLOBAL_GROUPS, GLOBALS } from "./globals.js";

const GLOBALS_NAME = "nodetool:globals";
const MAX_RANDOM_BYTES = 65536;

/** The bytes of a guest ArrayBuffer, copied out. */
function bytesOf(ctx, handle) {
  const view = ctx.getArrayBuffer(handle);
  try {
    return view.value.slice();
  } finally {
    view.dispose();
  }
}

function latin1(bytes) {
  let out = "";
  for (let i = 0; i < bytes.length; i += 4096) out += String.fromCharCode(...bytes.subarray(i, i + 4096));
  return out;
}

/**
 * Evaluates the script and calls it with the natives. `pending` is the run's list of awaited
 * host work: a digest or a sleep waits there like a host call, settled by its own `settle`.
 * Returns null, or the error handle of a failure (the caller owns it).
 */
export function installStandardGlobals(ctx, { keep, pending, deadline }) {
  const started = performance.now();
  const strings = (items) => {
    const array = ctx.newArray();
    items.forEach((item, i) => {
      const s = ctx.newString(item);
      ctx.setProp(array, i, s);
      s.dispose();
    });
    return array;
  };
  const buffer = (bytes) => ctx.newArrayBuffer(bytes.slice().buffer);
  const record = (u) =>
    strings([u.href, u.origin, u.protocol, u.username, u.password, u.host, u.hostname, u.port, u.pathname, u.search, u.hash]);
  // Host work the guest awaits: settled in the run's event loop, never directly from a
  // browser callback (the guest may be running then).
  const awaitHost = (work) => {
    const deferred = ctx.newPromise();
    const entry = { deferred, error: { alive: false }, done: false, outcome: null };
    entry.promise = Promise.resolve()
      .then(work)
      .then(
        (value) => {
          entry.done = true;
          entry.outcome = { ok: true, value };
        },
        (e) => {
          entry.done = true;
          entry.outcome = { ok: false, message: e && e.message ? e.message : String(e) };
        },
      );
    entry.settle = () => {
      if (entry.outcome.ok) {
        if (entry.outcome.value instanceof Uint8Array) {
          const value = buffer(entry.outcome.value);
          deferred.resolve(value);
          value.dispose();
        } else deferred.resolve();
      } else {
        const error = ctx.newError(entry.outcome.message);
        deferred.reject(error);
        error.dispose();
      }
    };
    pending.push(entry);
    return deferred.handle;
  };
  const natives = {
    utf8Encode: (text) => buffer(new TextEncoder().encode(ctx.getString(text))),
    utf8Decode: (bytes, fatal) => {
      try {
        return ctx.newString(new TextDecoder("utf-8", { fatal: ctx.dump(fatal) === true, ignoreBOM: true }).decode(bytesOf(ctx, bytes)));
      } catch (_) {
        return ctx.null;
      }
    },
    base64Encode: (bytes) => ctx.newString(btoa(latin1(bytesOf(ctx, bytes)))),
    base64Decode: (text) => {
      let binary;
      try {
        binary = atob(ctx.getString(text));
      } catch (_) {
        return ctx.null;
      }
      const out = new Uint8Array(binary.length);
      for (let i = 0; i < binary.length; i++) out[i] = binary.charCodeAt(i);
      return buffer(out);
    },
    randomBytes: (count) => {
      const n = ctx.getNumber(count);
      if (!(n >= 0 && n <= MAX_RANDOM_BYTES) || !Number.isInteger(n)) throw new RangeError("at most 65536 random bytes at a time");
      return buffer(crypto.getRandomValues(new Uint8Array(n)));
    },
    digest: (name, bytes) => {
      const algorithm = ctx.getString(name);
      const data = bytesOf(ctx, bytes);
      return awaitHost(async () => new Uint8Array(await crypto.subtle.digest(algorithm, data)));
    },
    urlParse: (input, base) => {
      const text = ctx.getString(input);
      const baseText = ctx.typeof(base) === "string" ? ctx.getString(base) : null;
      try {
        return record(baseText === null ? new URL(text) : new URL(text, baseText));
      } catch (_) {
        return ctx.null;
      }
    },
    urlSet: (href, field, value) => {
      let u;
      try {
        u = new URL(ctx.getString(href));
      } catch (_) {
        return ctx.null;
      }
      const name = ctx.getString(field);
      const text = ctx.getString(value);
      if (name === "href") {
        try {
          u.href = text;
        } catch (_) {
          return ctx.null;
        }
      } else if (["protocol", "username", "password", "host", "hostname", "port", "pathname", "search", "hash"].includes(name)) {
        u[name] = text;
      } else return ctx.null;
      return record(u);
    },
    // A leading "&" keeps a "?" the text starts with (URLSearchParams would drop one).
    formParse: (text) => {
      const flat = [];
      for (const [k, v] of new URLSearchParams(`&${ctx.getString(text)}`)) flat.push(k, v);
      return strings(flat);
    },
    formSerialize: (flat) => {
      const items = ctx.dump(flat);
      const params = new URLSearchParams();
      for (let i = 0; i + 1 < items.length; i += 2) params.append(String(items[i]), String(items[i + 1]));
      return ctx.newString(params.toString());
    },
    now: () => ctx.newNumber(Math.floor(performance.now() - started)),
    // A group's script, evaluated on the first read of one of its globals.
    group: (name) => {
      const group = ctx.getString(name);
      if (!Object.hasOwn(GLOBAL_GROUPS, group)) throw new TypeError("unknown group");
      const evaluated = ctx.evalCode(GLOBAL_GROUPS[group], `${GLOBALS_NAME}/${group}`);
      if (evaluated.error) {
        const error = ctx.dump(evaluated.error);
        evaluated.error.dispose();
        throw new Error(`the sandbox's ${group} globals did not evaluate: ${error && error.message ? error.message : String(error)}`);
      }
      return evaluated.value;
    },
    sleep: (ms) => {
      const wait = ctx.getNumber(ms);
      if (!(Date.now() + wait <= deadline)) return ctx.null;
      return awaitHost(() => new Promise((resolve) => setTimeout(resolve, wait)));
    },
  };
  // One native, `native(op, a, b, c)`, as the Rust guest gives the script.
  const native = keep(
    ctx.newFunction("native", (op, a, b, c) => {
      const fn = natives[ctx.getString(op)];
      if (typeof fn !== "function") throw new TypeError("unknown native");
      return fn(a, b, c);
    }),
  );
  const shell = ctx.evalCode(GLOBALS, GLOBALS_NAME);
  if (shell.error) return shell.error;
  const fn = keep(shell.value);
  const called = ctx.callFunction(fn, ctx.undefined, native);
  if (called.error) return called.error;
  called.value.dispose();
  return null;
}
