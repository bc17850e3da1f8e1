// The standard globals' TextEncoder, TextDecoder (UTF-8 only) group (see guest/src/globals.js): evaluated on the first read of
// one of its names, with the helpers the main script captured before any module ran.
(function (h) {
"use strict";
const { S, A, freeze, apply, U8, TypeErr, RangeErr, charCodeAt, toLower, trim, taBuffer, taOffset, taByteLength, taSet, taSubarray, abSlice, n, usv, tag, requireBuffer } = h;
const UTF8_LABELS = ["unicode-1-1-utf-8", "unicode11utf8", "unicode20utf8", "utf-8", "utf8", "x-unicode20utf8"];
class TextEncoder {
  get encoding() { return "utf-8"; }
  encode(input = "") {
    return new U8(n.utf8Encode(usv(input)));
  }
  encodeInto(source, destination) {
    if (tag(destination) !== "Uint8Array") throw new TypeErr("TextEncoder.encodeInto: the destination must be a Uint8Array");
    const text = usv(source);
    const bytes = new U8(n.utf8Encode(text));
    const room = apply(taByteLength, destination, []);
    if (bytes.length <= room) {
      apply(taSet, destination, [bytes]);
      return { read: text.length, written: bytes.length };
    }
    // Whole characters only: count what fits.
    let read = 0, written = 0;
    while (read < text.length) {
      const c = apply(charCodeAt, text, [read]);
      const units = c >= 0xd800 && c <= 0xdbff ? 2 : 1;
      const size = units === 2 ? 4 : c < 0x80 ? 1 : c < 0x800 ? 2 : 3;
      if (written + size > room) break;
      read += units;
      written += size;
    }
    apply(taSet, destination, [apply(taSubarray, bytes, [0, written])]);
    return { read, written };
  }
}
class TextDecoder {
  #fatal; #ignoreBOM; #pending = null; #started = false;
  constructor(label = "utf-8", options = undefined) {
    const name = apply(toLower, apply(trim, S(label), []), []);
    let known = false;
    for (const l of UTF8_LABELS) if (l === name) known = true;
    if (!known) throw new RangeErr("TextDecoder: the encoding \"" + S(label) + "\" is not supported (the sandbox decodes UTF-8 only)");
    this.#fatal = options != null && !!options.fatal;
    this.#ignoreBOM = options != null && !!options.ignoreBOM;
  }
  get encoding() { return "utf-8"; }
  get fatal() { return this.#fatal; }
  get ignoreBOM() { return this.#ignoreBOM; }
  decode(input = undefined, options = undefined) {
    const stream = options != null && !!options.stream;
    let bytes = input === undefined ? new U8(0) : new U8(requireBuffer(input, "TextDecoder.decode: the input"));
    if (this.#pending !== null) {
      const joined = new U8(this.#pending.length + bytes.length);
      apply(taSet, joined, [this.#pending]);
      apply(taSet, joined, [bytes, this.#pending.length]);
      bytes = joined;
      this.#pending = null;
    }
    if (stream) {
      // Hold back a trailing sequence that the next chunk may complete.
      const end = bytes.length;
      for (let k = 1; k <= 3 && k <= end; k++) {
        const c = bytes[end - k];
        if ((c & 0xc0) === 0x80) continue;
        const need = c >= 0xf0 && c <= 0xf4 ? 4 : c >= 0xe0 && c <= 0xef ? 3 : c >= 0xc2 && c <= 0xdf ? 2 : 1;
        if (need > k) {
          this.#pending = apply(taSubarray, bytes, [end - k]);
          bytes = apply(taSubarray, bytes, [0, end - k]);
        }
        break;
      }
    }
    const consumed = bytes.length > 0;
    if (!this.#started && !this.#ignoreBOM && bytes.length >= 3 && bytes[0] === 0xef && bytes[1] === 0xbb && bytes[2] === 0xbf) {
      bytes = apply(taSubarray, bytes, [3]);
    }
    // A stream's BOM is only looked for at its start; a call without stream ends the stream.
    this.#started = stream && (this.#started || consumed);
    const offset = apply(taOffset, bytes, []);
    const text = n.utf8Decode(apply(abSlice, apply(taBuffer, bytes, []), [offset, offset + bytes.length]), this.#fatal);
    if (text === null) {
      this.#pending = null;
      this.#started = false;
      throw new TypeErr("TextDecoder.decode: the input is not valid UTF-8");
    }
    return text;
  }
}
freeze(TextEncoder.prototype);
freeze(TextEncoder);
freeze(TextDecoder.prototype);
freeze(TextDecoder);
return { TextEncoder, TextDecoder };
})
