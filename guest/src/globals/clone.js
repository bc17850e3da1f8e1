// The standard globals' structuredClone group (see guest/src/globals.js): evaluated on the first read of
// one of its names, with the helpers the main script captured before any module ran.
(function (h) {
"use strict";
const { G, O, S, A, defineProperty, keys, apply, isArray, DV, MapC, SetC, TypeErr, iteratorSymbol, strSlice, arrayPush, mapGet, mapSet, mapHas, mapForEach, setAdd, setForEach, taBuffer, taOffset, taByteLength, abSlice, objectToString, dateGetTime, regexpSource, regexpFlags, tag, isArrayBuffer, isDataView, bufferOf, domError } = h;
const cloneError = (what) => domError("DataCloneError", "structuredClone: " + what + " could not be cloned");
const ERROR_NAMES = ["Error", "EvalError", "RangeError", "ReferenceError", "SyntaxError", "TypeError", "URIError"];
const structuredClone = function structuredClone(value, options = undefined) {
  if (arguments.length === 0) throw new TypeErr("structuredClone: 1 argument required");
  const seen = new MapC();
  const clone = (v) => {
    if (typeof v === "symbol") throw cloneError("a symbol");
    if (typeof v === "function") throw cloneError("a function");
    if (typeof v !== "object" || v === null) return v;
    if (apply(mapHas, seen, [v])) return apply(mapGet, seen, [v]);
    const kind = apply(objectToString, v, []);
    let out;
    if (kind === "[object Date]") out = new Date(apply(dateGetTime, v, []));
    else if (kind === "[object RegExp]") out = new RegExp(apply(regexpSource, v, []), apply(regexpFlags, v, []));
    else if (kind === "[object Boolean]" || kind === "[object Number]" || kind === "[object String]" || kind === "[object BigInt]") out = O(v.valueOf());
    else if (isArrayBuffer(v)) out = apply(abSlice, v, [0]);
    else if (tag(v) !== undefined) {
      const C = G[tag(v)];
      const offset = apply(taOffset, v, []);
      const buffer = apply(abSlice, apply(taBuffer, v, []), [offset, offset + apply(taByteLength, v, [])]);
      out = new C(buffer);
    } else if (isDataView(v)) out = new DV(bufferOf(v));
    else if (kind === "[object Map]") {
      out = new MapC();
      apply(mapSet, seen, [v, out]);
      const entries = [];
      apply(mapForEach, v, [(value, key) => apply(arrayPush, entries, [key, value])]);
      for (let i = 0; i < entries.length; i += 2) apply(mapSet, out, [clone(entries[i]), clone(entries[i + 1])]);
      return out;
    } else if (kind === "[object Set]") {
      out = new SetC();
      apply(mapSet, seen, [v, out]);
      const items = [];
      apply(setForEach, v, [(value) => apply(arrayPush, items, [value])]);
      for (const item of items) apply(setAdd, out, [clone(item)]);
      return out;
    } else if (kind === "[object Error]") {
      let name = "Error";
      for (const e of ERROR_NAMES) if (e === v.name) name = e;
      out = new G[name](v.message === undefined ? undefined : S(v.message));
      apply(mapSet, seen, [v, out]);
      if (v.stack !== undefined) defineProperty(out, "stack", { value: S(v.stack), writable: true, enumerable: false, configurable: true });
      if ("cause" in v) defineProperty(out, "cause", { value: clone(v.cause), writable: true, enumerable: false, configurable: true });
      return out;
    } else if (isArray(v)) {
      out = new A(v.length);
      apply(mapSet, seen, [v, out]);
      for (const key of keys(v)) out[key] = clone(v[key]);
      return out;
    } else if (kind === "[object Object]" || kind === "[object Arguments]") {
      out = {};
      apply(mapSet, seen, [v, out]);
      for (const key of keys(v)) defineProperty(out, key, { value: clone(v[key]), writable: true, enumerable: true, configurable: true });
      return out;
    } else if (kind === "[object Promise]" || kind === "[object WeakMap]" || kind === "[object WeakSet]") {
      throw cloneError("a " + apply(strSlice, kind, [8, -1]));
    } else {
      throw cloneError("an object of kind " + apply(strSlice, kind, [8, -1]));
    }
    apply(mapSet, seen, [v, out]);
    return out;
  };
  if (options != null && options.transfer !== undefined) {
    const transfer = options.transfer;
    if (transfer === null || typeof transfer !== "object" || typeof transfer[iteratorSymbol] !== "function") {
      throw new TypeErr("structuredClone: options.transfer must be a sequence");
    }
    for (const item of transfer) if (!isArrayBuffer(item)) throw cloneError("a transfer item that is not an ArrayBuffer");
  }
  return clone(value);
};
return { structuredClone };
})
