// The standard globals of a run, shared by the Rust guest (guest/src/globals.rs) and the browser
// runner (web/src/globals.js holds it and the group scripts of globals/ as JSON strings; a
// guest test fails on drift).
//
// This script's value is a function the host calls once per run, before any module exists,
// with its one native, `native(op, a, b, c)`: the byte and text work (UTF-8, base64, SHA
// digests, the CSPRNG, WHATWG URL parsing and form encoding) is the host's, in Rust from the
// url, sha1/sha2, getrandom and base64 crates, in the browser from the browser's own
// implementations. This shell gives them the web API's shape, checks arguments and throws
// every error, so both runtimes answer with one text. The native is closed over here and
// never becomes a global.
//
// Each global is a read-only accessor of globalThis whose group (the classes and functions
// behind it) is built on first use: a run that uses none of them pays only for the accessors.
//
// The ops (every byte argument and result is an ArrayBuffer, every text a string):
//   utf8Encode(text) -> bytes              text is well-formed
//   utf8Decode(bytes, fatal) -> text|null  null: malformed and fatal
//   base64Encode(bytes) -> text
//   base64Decode(text) -> bytes|null       forgiving-base64 (WHATWG); null: not base64
//   randomBytes(n) -> bytes                0 <= n <= 65536, from the OS CSPRNG
//   digest(name, bytes) -> bytes           name: SHA-1, SHA-256, SHA-384 or SHA-512
//   urlParse(input, base|null) -> record|null
//   urlSet(href, field, value) -> record|null   null: the setter refused (href only)
//   formParse(text) -> [name, value, ...]
//   formSerialize([name, value, ...]) -> text
//   now() -> whole milliseconds since the run started
//   sleep(ms) -> Promise|null              null: it would end after the run's deadline
//   group(name) -> function                the group script globals/<name>.js, evaluated
// A URL record is [href, origin, protocol, username, password, host, hostname, port,
// pathname, search, hash].
//
// ASCII only, so that its JSON form is the same from serde_json and from JSON.stringify.
(function (native) {
"use strict";
const G = globalThis, O = Object, S = String, N = Number, A = Array, R = Reflect;
const defineProperty = O.defineProperty, freeze = O.freeze, getPrototypeOf = O.getPrototypeOf;
const getOwnPropertyDescriptor = O.getOwnPropertyDescriptor, keys = O.keys;
const apply = R.apply, ownKeys = R.ownKeys, isArray = A.isArray;
const U8 = Uint8Array, AB = ArrayBuffer, DV = DataView, P = Promise, MapC = Map, SetC = Set;
const TypeErr = TypeError, RangeErr = RangeError, Err = Error, SyntaxErr = SyntaxError;
const mathTrunc = Math.trunc, iteratorSymbol = Symbol.iterator;
const fromCharCode = S.fromCharCode;
const charCodeAt = S.prototype.charCodeAt, toWellFormed = S.prototype.toWellFormed;
const toLower = S.prototype.toLowerCase, trim = S.prototype.trim, indexOf = S.prototype.indexOf;
const strSlice = S.prototype.slice;
const arrayPush = A.prototype.push, arrayJoin = A.prototype.join, arraySort = A.prototype.sort;
const arrayValues = A.prototype.values;
const promiseThen = P.prototype.then, promiseResolve = P.resolve, promiseReject = P.reject;
const mapGet = MapC.prototype.get, mapSet = MapC.prototype.set, mapHas = MapC.prototype.has;
const mapForEach = MapC.prototype.forEach, setAdd = SetC.prototype.add, setForEach = SetC.prototype.forEach;
const typedArrayProto = getPrototypeOf(U8.prototype);
const taTag = getOwnPropertyDescriptor(typedArrayProto, Symbol.toStringTag).get;
const taBuffer = getOwnPropertyDescriptor(typedArrayProto, "buffer").get;
const taOffset = getOwnPropertyDescriptor(typedArrayProto, "byteOffset").get;
const taByteLength = getOwnPropertyDescriptor(typedArrayProto, "byteLength").get;
const taSet = typedArrayProto.set, taSubarray = typedArrayProto.subarray;
const abByteLength = getOwnPropertyDescriptor(AB.prototype, "byteLength").get;
const abSlice = AB.prototype.slice;
const dvBuffer = getOwnPropertyDescriptor(DV.prototype, "buffer").get;
const dvOffset = getOwnPropertyDescriptor(DV.prototype, "byteOffset").get;
const dvLength = getOwnPropertyDescriptor(DV.prototype, "byteLength").get;
const objectToString = O.prototype.toString;
const dateGetTime = Date.prototype.getTime;
const regexpSource = getOwnPropertyDescriptor(RegExp.prototype, "source").get;
const regexpFlags = getOwnPropertyDescriptor(RegExp.prototype, "flags").get;
const n = {
  utf8Encode: (a) => native("utf8Encode", a),
  utf8Decode: (a, b) => native("utf8Decode", a, b),
  base64Encode: (a) => native("base64Encode", a),
  base64Decode: (a) => native("base64Decode", a),
  randomBytes: (a) => native("randomBytes", a),
  digest: (a, b) => native("digest", a, b),
  urlParse: (a, b) => native("urlParse", a, b),
  urlSet: (a, b, c) => native("urlSet", a, b, c),
  formParse: (a) => native("formParse", a),
  formSerialize: (a) => native("formSerialize", a),
  now: () => native("now"),
  sleep: (a) => native("sleep", a),
};

const method = (object, name, value) =>
  defineProperty(object, name, { value, writable: true, enumerable: false, configurable: true });
const usv = (value) => apply(toWellFormed, S(value), []);
const tag = (value) => {
  try { return apply(taTag, value, []); } catch (_) { return undefined; }
};
const isArrayBuffer = (value) => {
  try { apply(abByteLength, value, []); return true; } catch (_) { return false; }
};
const isDataView = (value) => {
  try { apply(dvBuffer, value, []); return true; } catch (_) { return false; }
};
// A copy of a BufferSource's bytes as an ArrayBuffer, or undefined when it is none.
const bufferOf = (value) => {
  if (tag(value) !== undefined) {
    const offset = apply(taOffset, value, []);
    return apply(abSlice, apply(taBuffer, value, []), [offset, offset + apply(taByteLength, value, [])]);
  }
  if (isArrayBuffer(value)) return apply(abSlice, value, [0]);
  if (isDataView(value)) {
    const offset = apply(dvOffset, value, []);
    return apply(abSlice, apply(dvBuffer, value, []), [offset, offset + apply(dvLength, value, [])]);
  }
  return undefined;
};
const requireBuffer = (value, what) => {
  const buffer = bufferOf(value);
  if (buffer === undefined) throw new TypeErr(what + " must be an ArrayBuffer, a typed array or a DataView");
  return buffer;
};
const domError = (name, message) => {
  const error = new Err(message);
  defineProperty(error, "name", { value: name, writable: true, enumerable: false, configurable: true });
  return error;
};
const bytesToLatin1 = (bytes) => {
  let out = "";
  for (let i = 0; i < bytes.length; i += 4096) {
    out += apply(fromCharCode, null, apply(taSubarray, bytes, [i, i + 4096]));
  }
  return out;
};
const HEX = "0123456789abcdef";

// ---- the bindings: read-only accessors; a group's script is evaluated (with these helpers)
// when one of its names is first read
const h = freeze({ G, O, S, N, A, R, defineProperty, freeze, getPrototypeOf, getOwnPropertyDescriptor, keys, apply, ownKeys, isArray, U8, AB, DV, P, MapC, SetC, TypeErr, RangeErr, Err, SyntaxErr, mathTrunc, iteratorSymbol, fromCharCode, charCodeAt, toWellFormed, toLower, trim, indexOf, strSlice, arrayPush, arrayJoin, arraySort, arrayValues, promiseThen, promiseResolve, promiseReject, mapGet, mapSet, mapHas, mapForEach, setAdd, setForEach, typedArrayProto, taTag, taBuffer, taOffset, taByteLength, taSet, taSubarray, abByteLength, abSlice, dvBuffer, dvOffset, dvLength, objectToString, dateGetTime, regexpSource, regexpFlags, n, method, usv, tag, isArrayBuffer, isDataView, bufferOf, requireBuffer, domError, bytesToLatin1, HEX });
const lazy = (group, names) => {
  let built = null;
  const getter = (name) => function () {
    if (built === null) built = native("group", group)(h);
    return built[name];
  };
  for (const name of names) defineProperty(G, name, { get: getter(name), enumerable: false, configurable: false });
};
lazy("text", ["TextEncoder", "TextDecoder"]);
lazy("bytes", ["atob", "btoa", "toBase64", "fromBase64", "toHex", "fromHex"]);
lazy("crypto", ["crypto"]);
lazy("clone", ["structuredClone"]);
lazy("url", ["URL", "URLSearchParams"]);
lazy("misc", ["queueMicrotask", "performance", "sleep"]);
})
