// The standard globals' atob, btoa and the byte helpers group (see guest/src/globals.js): evaluated on the first read of
// one of its names, with the helpers the main script captured before any module ran.
(function (h) {
"use strict";
const { S, apply, U8, TypeErr, SyntaxErr, charCodeAt, toLower, indexOf, n, usv, requireBuffer, domError, bytesToLatin1, HEX } = h;
const btoa = function btoa(data) {
  if (arguments.length === 0) throw new TypeErr("btoa: 1 argument required");
  const text = S(data);
  const bytes = new U8(text.length);
  for (let i = 0; i < text.length; i++) {
    const c = apply(charCodeAt, text, [i]);
    if (c > 0xff) throw domError("InvalidCharacterError", "btoa: the string contains a character outside Latin-1");
    bytes[i] = c;
  }
  return n.base64Encode(bytes.buffer);
};
const atob = function atob(data) {
  if (arguments.length === 0) throw new TypeErr("atob: 1 argument required");
  const decoded = n.base64Decode(S(data));
  if (decoded === null) throw domError("InvalidCharacterError", "atob: the string is not valid base64");
  return bytesToLatin1(new U8(decoded));
};
// Text is its UTF-8 bytes; anything else must be bytes.
const bytesOrText = (value, what) =>
  typeof value === "string" ? n.utf8Encode(usv(value)) : requireBuffer(value, what + ": the input (when not a string)");
const toBase64 = function toBase64(data) {
  return n.base64Encode(bytesOrText(data, "toBase64"));
};
const fromBase64 = function fromBase64(text) {
  if (typeof text !== "string") throw new TypeErr("fromBase64: the input must be a string");
  const decoded = n.base64Decode(text);
  if (decoded === null) throw new SyntaxErr("fromBase64: the string is not valid base64");
  return new U8(decoded);
};
const toHex = function toHex(data) {
  const bytes = new U8(bytesOrText(data, "toHex"));
  let out = "";
  for (let i = 0; i < bytes.length; i++) out += HEX[bytes[i] >> 4] + HEX[bytes[i] & 15];
  return out;
};
const fromHex = function fromHex(text) {
  if (typeof text !== "string") throw new TypeErr("fromHex: the input must be a string");
  if (text.length % 2 !== 0) throw new SyntaxErr("fromHex: the string has an odd number of digits");
  const lower = apply(toLower, text, []);
  const out = new U8(text.length / 2);
  for (let i = 0; i < out.length; i++) {
    const hi = apply(indexOf, HEX, [lower[2 * i]]), lo = apply(indexOf, HEX, [lower[2 * i + 1]]);
    if (hi < 0 || lo < 0) throw new SyntaxErr("fromHex: the string is not hexadecimal");
    out[i] = hi * 16 + lo;
  }
  return out;
};
return { atob, btoa, toBase64, fromBase64, toHex, fromHex };
})
