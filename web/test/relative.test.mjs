// The browser runner's relative-import rule (src/relative.js) over every case of the Rust rule
// (nodetool_jssource::relative::CASES), exported as tests/contract/relative.json by
// `cargo xtask export`.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

import { isRelative, joinRelative, relativeCandidates, relativeFile } from "../src/relative.js";

const here = dirname(fileURLToPath(import.meta.url));
const document = JSON.parse(await readFile(join(here, "../../tests/contract/relative.json"), "utf8"));

test("the exported cases are the relative-import cases", () => {
  assert.equal(document.format, "nodetool-sandbox-relative-cases/1");
  assert.ok(document.cases.length > 0);
  assert.ok(document.cases.some((c) => c.joined === null));
  assert.ok(document.cases.some((c) => c.joined !== null && c.relative));
});

for (const c of document.cases) {
  test(`${JSON.stringify(c.request)} from ${c.importer}: ${c.note}`, () => {
    assert.equal(isRelative(c.request), c.relative, "isRelative");
    assert.equal(joinRelative(c.importer, c.request), c.joined, "joinRelative");
    assert.equal(relativeFile(c.importer, c.request), c.file, "relativeFile");
    if (c.joined !== null) assert.deepEqual(relativeCandidates(c.joined), c.candidates, "relativeCandidates");
    else assert.equal(c.candidates, null);
  });
}
