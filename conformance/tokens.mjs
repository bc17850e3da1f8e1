// The token ids js-tiktoken (the reference's library) gives, for `tokens_interop.rs` to compare
// with ours. Reads `{"encodings": [...], "texts": [...]}` on stdin and writes
// `{"version": "...", "ids": {"<encoding>": [[id, ...], ...]}}` (one list per text, in order).
// Special-token spellings are encoded as ordinary text (no special token allowed, none
// disallowed), as `tokens.encode` does.
import { getEncoding } from "js-tiktoken";
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const input = JSON.parse(readFileSync(0, "utf8"));
// The package's `exports` hide its package.json; read it beside this script's node_modules.
const here = dirname(fileURLToPath(import.meta.url));
const version = JSON.parse(
  readFileSync(join(here, "node_modules/js-tiktoken/package.json"), "utf8")
).version;
const ids = {};
for (const name of input.encodings) {
  const encoding = getEncoding(name);
  ids[name] = input.texts.map((text) => encoding.encode(text, [], []));
}
process.stdout.write(JSON.stringify({ version, ids }));
