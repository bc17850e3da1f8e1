// The browser runner's specifier grammar (src/names.js) over every case of the Rust rule
// (nodetool_protocol::names::split_specifier), exported as tests/contract/specifiers.json by
// `cargo xtask export`.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

import { isSpecifier, packNameOf, splitSpecifier } from "../src/names.js";

const here = dirname(fileURLToPath(import.meta.url));
const document = JSON.parse(await readFile(join(here, "../../tests/contract/specifiers.json"), "utf8"));

test("the exported cases are the specifier grammar's cases", () => {
  assert.equal(document.format, "nodetool-sandbox-specifier-cases/1");
  assert.ok(document.cases.some((c) => c.split === null));
  assert.ok(document.cases.some((c) => c.split !== null && c.split[1] !== "."));
});

for (const c of document.cases) {
  const label = c.text.length > 40 ? `${c.text.slice(0, 20)}... (${c.text.length})` : JSON.stringify(c.text);
  test(`${label} splits as the Rust rule does`, () => {
    assert.deepEqual(splitSpecifier(c.text), c.split, "splitSpecifier");
    assert.equal(isSpecifier(c.text), c.split !== null, "isSpecifier");
    assert.equal(packNameOf(c.text), c.split === null ? c.text : c.split[0], "packNameOf");
  });
}
