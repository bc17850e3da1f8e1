// Every run error code the browser runner can answer with is one of the protocol's closed list
// (exported with the fixtures), and a worker that dies under a run is `sandbox-crashed`, as on
// the server.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFile, readdir } from "node:fs/promises";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const exported = JSON.parse(await readFile(join(here, "../../tests/contract/fixtures.json"), "utf8"));

test("the exported list holds the protocol's codes, sandbox-crashed included", () => {
  assert.ok(Array.isArray(exported.runErrorCodes));
  for (const code of ["timeout", "memory-limit", "cancelled", "sandbox-crashed"]) {
    assert.ok(exported.runErrorCodes.includes(code), code);
  }
});

test("every code the runner's sources answer with is in the closed list", async () => {
  const src = join(here, "../src");
  const used = new Set();
  for (const name of await readdir(src)) {
    if (!name.endsWith(".js")) continue;
    const text = await readFile(join(src, name), "utf8");
    for (const m of text.matchAll(/runError\("([a-z-]+)"/g)) used.add(m[1]);
    for (const m of text.matchAll(/code: "([a-z-]+)"/g)) used.add(m[1]);
  }
  assert.ok(used.has("sandbox-crashed"), "the runner names a dead worker");
  for (const code of used) assert.ok(exported.runErrorCodes.includes(code), `${code} is not a protocol code`);
});
