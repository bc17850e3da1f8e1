// The script every run evaluates before any module: the hardening of guest/src/run.rs's
// prelude (every code-generating constructor replaced by a guard that names what it refused,
// `eval` refused, and the replacements made permanent), the removal of the host-flavoured
// globals the Rust guest's context never has, and the helpers the host uses to move values
// across the boundary. The helpers are closures over intrinsics captured here, before any pack
// or body code exists, and reach the host only as this script's completion value: no global
// ever holds them.

export const PRELUDE_NAME = "nodetool:prelude";

export const PRELUDE = String.raw`(() => {
"use strict";
const O = Object, R = Reflect, J = JSON, S = String, N = Number, A = Array;
const defineProperty = O.defineProperty, getPrototypeOf = O.getPrototypeOf;
const create = O.create, getOwnPropertyDescriptor = O.getOwnPropertyDescriptor, keys = O.keys, freeze = O.freeze;
const apply = R.apply, isArray = A.isArray, stringify = J.stringify, parse = J.parse;
const hasOwn = O.prototype.hasOwnProperty;
const U8 = Uint8Array, AB = ArrayBuffer, Err = Error, P = Promise;
const promiseThen = P.prototype.then, promiseResolve = P.resolve, promiseReject = P.reject;
const typedArrayProto = getPrototypeOf(U8.prototype);
const taTag = getOwnPropertyDescriptor(typedArrayProto, Symbol.toStringTag).get;
const taBuffer = getOwnPropertyDescriptor(typedArrayProto, "buffer").get;
const taOffset = getOwnPropertyDescriptor(typedArrayProto, "byteOffset").get;
const taLength = getOwnPropertyDescriptor(typedArrayProto, "byteLength").get;
const abLength = getOwnPropertyDescriptor(AB.prototype, "byteLength").get;
const abSlice = AB.prototype.slice;
const objectToString = O.prototype.toString;
const isErrorBuiltin = typeof Err.isError === "function" ? Err.isError : null;

// ---- hardening
const refuse = (what) => {
  throw new EvalError(what + " is not allowed in the sandbox: code cannot be generated from strings");
};
// The handler has no prototype: a trap it lacks would be looked up on Object.prototype, where a
// body could plant a "get" trap that receives the real constructor as its target.
const guard = (ctor, what) => new Proxy(ctor, {
  __proto__: null,
  apply() { refuse(what); },
  construct() { refuse(what); },
});
const fix = (object, key, value) => defineProperty(object, key, { value, writable: false, enumerable: false, configurable: false });
const constructors = [
  [Function, "the Function constructor"],
  [getPrototypeOf(async function () {}).constructor, "the AsyncFunction constructor"],
  [getPrototypeOf(function* () {}).constructor, "the GeneratorFunction constructor"],
  [getPrototypeOf(async function* () {}).constructor, "the AsyncGeneratorFunction constructor"],
];
// The async and generator constructors inherit from the Function guard, so
// Object.getPrototypeOf of their guards never yields the real Function.
let functionGuard = null;
for (const [ctor, what] of constructors) {
  if (functionGuard !== null) O.setPrototypeOf(ctor, functionGuard);
  const g = guard(ctor, what);
  if (functionGuard === null) functionGuard = g;
  fix(ctor.prototype, "constructor", g);
}
fix(globalThis, "Function", Function.prototype.constructor);
fix(globalThis, "eval", () => refuse("eval"));
// The Rust guest's context is built without these intrinsics.
for (const name of ["performance", "DOMException"]) delete globalThis[name];

// ---- values out of the guest (a port of guest/src/convert.rs from_js)
const MAX_DEPTH = 64;
const NODE_BYTES = 32;
const B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
const base64 = (bytes) => {
  let out = "";
  const n = bytes.length;
  let i = 0;
  for (; i + 2 < n; i += 3) {
    const v = (bytes[i] << 16) | (bytes[i + 1] << 8) | bytes[i + 2];
    out += B64[v >> 18] + B64[(v >> 12) & 63] + B64[(v >> 6) & 63] + B64[v & 63];
  }
  if (i < n) {
    const v = (bytes[i] << 16) | ((i + 1 < n ? bytes[i + 1] : 0) << 8);
    out += B64[v >> 18] + B64[(v >> 12) & 63] + (i + 1 < n ? B64[(v >> 6) & 63] : "=") + "=";
  }
  return out;
};
const unbase64 = (text) => {
  if (typeof text !== "string" || text.length % 4 !== 0) return null;
  const pad = text.endsWith("==") ? 2 : text.endsWith("=") ? 1 : 0;
  const out = new U8((text.length / 4) * 3 - pad);
  let o = 0;
  for (let i = 0; i < text.length; i += 4) {
    let v = 0;
    for (let j = 0; j < 4; j++) {
      const c = text[i + j];
      let d;
      if (c === "=" && i + 4 === text.length && j >= 4 - pad) d = 0;
      else {
        d = apply(S.prototype.indexOf, B64, [c]);
        if (d < 0) return null;
      }
      v = v * 64 + d;
    }
    if (o < out.length) out[o++] = (v >> 16) & 255;
    if (o < out.length) out[o++] = (v >> 8) & 255;
    if (o < out.length) out[o++] = v & 255;
  }
  return out;
};
// The bytes of any typed array's view or of an ArrayBuffer (copied), or undefined.
const bytesOf = (value) => {
  if (apply(taTag, value, []) !== undefined) {
    const buffer = apply(taBuffer, value, []);
    const offset = apply(taOffset, value, []);
    const length = apply(taLength, value, []);
    return new U8(apply(abSlice, buffer, [offset, offset + length]));
  }
  try {
    apply(abLength, value, []);
  } catch (_) {
    return undefined;
  }
  return new U8(apply(abSlice, value, [0]));
};
const isPromise = (value) => {
  try {
    apply(promiseThen, value, [undefined, undefined]);
    return true;
  } catch (_) {
    return false;
  }
};
const isError = (value) => {
  if (value === null || typeof value !== "object") return false;
  if (isErrorBuiltin) return isErrorBuiltin(value);
  return apply(objectToString, value, []) === "[object Error]";
};
const describe = (value) => {
  if (value !== null && typeof value === "object") {
    let name, message;
    try { name = value.name; message = value.message; } catch (_) { message = undefined; }
    if (typeof message === "string") {
      return typeof name === "string" && name !== "" ? name + ": " + message : message;
    }
  }
  if (typeof value === "string") return value;
  const crossed = cross(value, "the thrown value", 64 * 1024 * 1024, false);
  return crossed.ok ? crossed.text : crossed.message;
};
class CrossError {
  constructor(message) { this.message = message; }
}
// Returns {ok: true, text} (JSON; bytes as {"$bytes": ...}; with keepNumbers, non-finite
// numbers as {"$nodetoolNumber": "NaN"|"Infinity"|"-Infinity"}, else null) or {ok: false,
// message}. An uncatchable interrupt passes through.
const cross = (root, what, budget, keepNumbers) => {
  let left = budget;
  // Null-prototype records with their own counters: nothing the guest put on a prototype
  // can intercept what the walk writes.
  const stack = create(null);
  let depth = 0;
  const spend = (path, bytes) => {
    left -= bytes + NODE_BYTES;
    if (left < 0) {
      throw new CrossError(path + " is larger than the " + budget + " bytes a value may occupy when it crosses the sandbox boundary");
    }
  };
  const number = (n) => {
    if (n === n && n !== Infinity && n !== -Infinity) return stringify(n);
    if (!keepNumbers) return "null";
    return '{"$nodetoolNumber":"' + (n !== n ? "NaN" : n > 0 ? "Infinity" : "-Infinity") + '"}';
  };
  // undefined stands for "undefined" (dropped from objects, null in arrays).
  const walk = (value, path) => {
    spend(path, 0);
    const fail = (why) => { throw new CrossError(path + " " + why); };
    switch (typeof value) {
      case "undefined": case "symbol": case "function": return undefined;
      case "boolean": return value ? "true" : "false";
      case "number": return number(value);
      case "string": spend(path, value.length); return stringify(value);
      case "bigint": return fail("is a BigInt, which cannot cross the sandbox boundary; convert it with String() or Number()");
    }
    if (value === null) return "null";
    const bytes = bytesOf(value);
    if (bytes !== undefined) {
      spend(path, bytes.length);
      return '{"$bytes":"' + base64(bytes) + '"}';
    }
    for (let i = 0; i < depth; i++) {
      if (stack[i] === value) fail("refers back to itself (a cycle), which cannot cross the sandbox boundary");
    }
    if (depth >= MAX_DEPTH) fail("is nested more than " + MAX_DEPTH + " levels deep");
    let toJSON;
    try { toJSON = value.toJSON; } catch (_) { toJSON = undefined; }
    if (typeof toJSON === "function") {
      let converted;
      try {
        converted = apply(toJSON, value, []);
      } catch (e) {
        fail("could not be read: " + describe(e));
      }
      if (converted !== value) {
        stack[depth++] = value;
        const out = walk(converted, path);
        depth -= 1;
        return out;
      }
    }
    stack[depth++] = value;
    let out;
    if (isArray(value)) {
      const length = N(value.length) >>> 0;
      spend(path, length * 16);
      out = "[";
      for (let i = 0; i < length; i++) {
        let item;
        try { item = value[i]; } catch (e) {
          throw new CrossError(path + "[" + i + "] could not be read: " + describe(e));
        }
        const text = walk(item, path + "[" + i + "]");
        out += (i ? "," : "") + (text === undefined ? "null" : text);
      }
      out += "]";
    } else if (isPromise(value)) {
      fail("is a Promise; await it before it crosses the sandbox boundary");
    } else {
      out = "{";
      let first = true;
      const names = keys(value);
      for (let i = 0; i < names.length; i++) {
        const key = names[i];
        spend(path, key.length);
        let item;
        try { item = value[key]; } catch (e) {
          throw new CrossError(path + "." + key + " could not be read: " + describe(e));
        }
        const text = walk(item, path + "." + key);
        if (text !== undefined) {
          out += (first ? "" : ",") + stringify(key) + ":" + text;
          first = false;
        }
      }
      out += "}";
    }
    depth -= 1;
    return out;
  };
  try {
    const text = walk(root, what);
    return { ok: true, text: text === undefined ? "null" : text };
  } catch (e) {
    if (e instanceof CrossError) return { ok: false, message: e.message };
    throw e;
  }
};

// ---- values into the guest (a port of to_js): JSON with {"$bytes": ...} revived as bytes,
// every member defined (so "__proto__" stays an ordinary key), optionally deeply frozen.
const revive = (text, deep) => {
  const build = (value, depth) => {
    if (depth > MAX_DEPTH) throw new Err("value nested too deeply to cross into the sandbox");
    if (value === null || typeof value !== "object") return value;
    if (isArray(value)) {
      for (let i = 0; i < value.length; i++) {
        defineProperty(value, i, { value: build(value[i], depth + 1), writable: true, enumerable: true, configurable: true });
      }
      return deep ? freeze(value) : value;
    }
    const names = keys(value);
    if (names.length === 1 && names[0] === "$bytes") {
      const bytes = unbase64(value.$bytes);
      if (bytes !== null) return bytes;
    }
    for (let i = 0; i < names.length; i++) {
      const v = value[names[i]];
      if (v !== null && typeof v === "object") {
        defineProperty(value, names[i], { value: build(v, depth + 1), writable: true, enumerable: true, configurable: true });
      }
    }
    return deep ? freeze(value) : value;
  };
  return build(parse(text), 0);
};

const consoleOf = (sink) => {
  const format = (args) => {
    let line = "";
    for (let i = 0; i < args.length; i++) {
      const v = args[i];
      let text;
      if (typeof v === "string") text = v;
      else if (v === undefined || typeof v === "function" || typeof v === "symbol") text = "undefined";
      else if (isError(v)) text = describe(v);
      else {
        const crossed = cross(v, "the value", 64 * 1024, false);
        if (!crossed.ok) text = "[" + crossed.message + "]";
        else text = crossed.text;
      }
      line += (i ? " " : "") + text;
    }
    return line;
  };
  // The JSON of a top-level undefined is "null"; the Rust guest prints "undefined".
  const one = (level) => function (...args) {
    sink(level, format(args));
  };
  return freeze({ log: one("log"), info: one("info"), warn: one("warn"), error: one("error"), debug: one("debug") });
};

const getSecretOf = (text) => {
  const table = parse(text);
  return function getSecret(name) {
    if (typeof name !== "string") return apply(promiseReject, P, [new Err("getSecret: the secret name must be a string")]);
    if (apply(hasOwn, table, [name])) return apply(promiseResolve, P, [table[name]]);
    return apply(promiseReject, P, [new Err('getSecret: the secret "' + name + '" was not granted to this run')]);
  };
};

const install = (name, value) => defineProperty(globalThis, name, { value, writable: false, enumerable: false, configurable: false });

return freeze({
  cross,
  crossArgs(list, keepNumbers) {
    if (!isArray(list)) return { ok: false, notList: true };
    let text = "[";
    for (let i = 0; i < list.length; i++) {
      const crossed = cross(list[i], "argument " + (i + 1), 64 * 1024 * 1024, keepNumbers);
      if (!crossed.ok) return crossed;
      text += (i ? "," : "") + crossed.text;
    }
    return { ok: true, text: text + "]" };
  },
  revive,
  describe,
  isError,
  newError: () => new Err(""),
  setMessage: (error, message) => { error.message = message; return error; },
  install,
  installConsole: (sink) => install("console", consoleOf(sink)),
  installInputs: (text) => install("inputs", revive(text, true)),
  installGetSecret: (text) => install("getSecret", getSecretOf(text)),
  errorInfo: (value) => {
    const info = { name: "", message: undefined, stack: "" };
    if (value !== null && (typeof value === "object" || typeof value === "function")) {
      try { if (typeof value.name === "string") info.name = value.name; } catch (_) {}
      try { if (typeof value.message === "string") info.message = value.message; } catch (_) {}
      try { if (typeof value.stack === "string") info.stack = value.stack; } catch (_) {}
    }
    info.described = describe(value);
    return info;
  },
});
})()`;
