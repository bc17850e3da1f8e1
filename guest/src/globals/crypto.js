// The standard globals' crypto group (see guest/src/globals.js): evaluated on the first read of
// one of its names, with the helpers the main script captured before any module ran.
(function (h) {
"use strict";
const { S, freeze, apply, U8, P, promiseResolve, promiseReject, taBuffer, taOffset, taByteLength, taSet, n, tag, requireBuffer, domError, HEX } = h;
const INTEGER_ARRAYS = ["Int8Array", "Uint8Array", "Uint8ClampedArray", "Int16Array", "Uint16Array", "Int32Array", "Uint32Array", "BigInt64Array", "BigUint64Array"];
const getRandomValues = function getRandomValues(array) {
  const kind = tag(array);
  let integer = false;
  for (const k of INTEGER_ARRAYS) if (k === kind) integer = true;
  if (!integer) throw domError("TypeMismatchError", "crypto.getRandomValues: the argument must be an integer typed array");
  const length = apply(taByteLength, array, []);
  if (length > 65536) throw domError("QuotaExceededError", "crypto.getRandomValues: at most 65536 bytes at a time (asked for " + length + ")");
  const view = new U8(apply(taBuffer, array, []), apply(taOffset, array, []), length);
  apply(taSet, view, [new U8(n.randomBytes(length))]);
  return array;
};
const randomUUID = function randomUUID() {
  const b = new U8(n.randomBytes(16));
  b[6] = (b[6] & 0x0f) | 0x40;
  b[8] = (b[8] & 0x3f) | 0x80;
  let out = "";
  for (let i = 0; i < 16; i++) {
    if (i === 4 || i === 6 || i === 8 || i === 10) out += "-";
    out += HEX[b[i] >> 4] + HEX[b[i] & 15];
  }
  return out;
};
const DIGESTS = ["SHA-1", "SHA-256", "SHA-384", "SHA-512"];
const digest = function digest(algorithm, data) {
  try {
    const name = typeof algorithm === "object" && algorithm !== null ? algorithm.name : algorithm;
    const upper = apply(S.prototype.toUpperCase, S(name), []);
    let known = null;
    for (const d of DIGESTS) if (d === upper) known = d;
    if (known === null) throw domError("NotSupportedError", "crypto.subtle.digest: the algorithm \"" + S(name) + "\" is not supported (SHA-1, SHA-256, SHA-384, SHA-512)");
    return apply(promiseResolve, P, [n.digest(known, requireBuffer(data, "crypto.subtle.digest: the data"))]);
  } catch (error) {
    return apply(promiseReject, P, [error]);
  }
};
const subtle = freeze({ digest });
const crypto = freeze({ getRandomValues, randomUUID, subtle });
return { crypto };
})
