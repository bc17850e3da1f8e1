// exifr (the reference's EXIF library) on a list of files, for host-modules/tests/exif_interop.rs.
//
// stdin:  {"files": [{"name": "...", "base64": "..."}]}
// stdout: {"results": [{"name": "...", "ok": true, "value": {...} | null} |
//                      {"name": "...", "ok": false, "error": "..."}]}
//
// exifr.parse runs with its default options, as the reference's exif.ts calls it. Its output is
// written in the sandbox's JSON shape: bytes (Uint8Array) as {"$bytes": base64}, other typed
// arrays as arrays, a Date as its local ISO text without a zone (what the host module returns),
// undefined members left out.
import exifr from "exifr";

function plain(value) {
  if (value === undefined) return undefined;
  if (value === null) return null;
  if (value instanceof Date) {
    const pad = (n, w = 2) => String(n).padStart(w, "0");
    return `${pad(value.getFullYear(), 4)}-${pad(value.getMonth() + 1)}-${pad(value.getDate())}T${pad(value.getHours())}:${pad(value.getMinutes())}:${pad(value.getSeconds())}`;
  }
  if (value instanceof Uint8Array) {
    return { $bytes: Buffer.from(value.buffer, value.byteOffset, value.byteLength).toString("base64") };
  }
  if (ArrayBuffer.isView(value)) return Array.from(value, plain);
  if (Array.isArray(value)) return value.map(plain);
  if (typeof value === "number") return Number.isFinite(value) ? value : null;
  if (typeof value === "object") {
    const out = {};
    for (const [k, v] of Object.entries(value)) {
      const p = plain(v);
      if (p !== undefined) out[k] = p;
    }
    return out;
  }
  return value;
}

const chunks = [];
for await (const chunk of process.stdin) chunks.push(chunk);
const { files } = JSON.parse(Buffer.concat(chunks).toString("utf8"));
const results = [];
for (const file of files) {
  const bytes = new Uint8Array(Buffer.from(file.base64, "base64"));
  try {
    const value = await exifr.parse(bytes);
    results.push({ name: file.name, ok: true, value: value === undefined ? null : plain(value) });
  } catch (e) {
    results.push({ name: file.name, ok: false, error: String(e && e.message ? e.message : e) });
  }
}
process.stdout.write(JSON.stringify({ results }));
