// The contract fixtures through the runner in Node, against an in-memory delivery route that
// answers as the server does (bodies, X-Content-Sha256, dependency ids). The browser run of
// the same fixtures, through the real server and route, is `cargo xtask fixtures --browser`.
import { test } from "node:test";
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { readFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

import { createRunner } from "../src/run.js";
import { hostFacadeSource } from "../src/facade.js";

const here = dirname(fileURLToPath(import.meta.url));
const require = createRequire(import.meta.url);
const wasmPath = join(dirname(require.resolve("@jitl/quickjs-ng-wasmfile-release-sync/package.json")), "dist/emscripten-module.wasm");
const fixtures = JSON.parse(await readFile(join(here, "../../tests/contract/fixtures.json"), "utf8")).fixtures;

/** A fetch that serves the wasm engine and one fixture's modules as the delivery route would. */
function fakeFetch(modules, tamper) {
  const bodies = new Map();
  for (const m of modules) {
    const entry = (id, headers, body) => bodies.set(id, { headers, body });
    const common = { "x-sandbox-pack": m.packName, "x-content-digest": m.contentDigest, etag: `"${m.contentDigest}"` };
    if (m.kind === "host") {
      entry(m.specifier, { ...common, "content-type": "text/javascript", "x-sandbox-file-id": m.moduleId, "x-sandbox-internal": "0", "x-sandbox-module-dependencies": "[]", "x-sandbox-host-module": m.hostId }, hostFacadeSource(m.specifier, []));
      continue;
    }
    for (const f of m.graph) {
      if (f.kind === "wasm") {
        const contract = f.id === m.moduleId ? { "x-sandbox-wasm-contract": JSON.stringify(m.wasm) } : {};
        const headers = { ...common, "content-type": "application/wasm", "x-sandbox-file-id": f.id, "x-sandbox-internal": f.internal ? "1" : "0", "x-sandbox-module-dependencies": "[]", ...contract };
        entry(`${m.packName}::${f.id}`, headers, Buffer.from(f.bytes, "base64"));
        if (f.id === m.moduleId) entry(m.specifier, headers, Buffer.from(f.bytes, "base64"));
        continue;
      }
      const headers = { ...common, "content-type": "text/javascript", "x-sandbox-file-id": f.id, "x-sandbox-internal": f.internal ? "1" : "0", "x-sandbox-module-dependencies": JSON.stringify(f.dependencies.map((d) => `${m.packName}::${d}`)) };
      entry(`${m.packName}::${f.id}`, headers, f.source);
      if (f.id === m.moduleId) entry(m.specifier, headers, f.source);
    }
  }
  return async (url, init = {}) => {
    if (String(url).endsWith(".wasm")) return new Response(await readFile(wasmPath), { headers: { "content-type": "application/wasm" } });
    const id = String(url).replace(/^\/api\/sandbox-modules\//, "").split("/").map(decodeURIComponent).join("/");
    const found = bodies.get(id);
    if (!found) return new Response(JSON.stringify({ detail: `Sandbox module ${id} is not installed.` }), { status: 404 });
    let bytes = Buffer.isBuffer(found.body) ? found.body : Buffer.from(found.body, "utf8");
    const sha = createHash("sha256").update(bytes).digest("hex");
    if (tamper === id) {
      bytes = Buffer.from(bytes);
      bytes[0] ^= 1;
    }
    return new Response(bytes, { status: 200, headers: { ...found.headers, "x-content-sha256": sha } });
  };
}

export function check(fixture, answer) {
  const want = fixture.expect;
  if ("result" in want) {
    assert.ok(answer.ok, `expected a result, got ${JSON.stringify(answer.error)}`);
    assert.deepEqual(answer.result, want.result);
    return;
  }
  if (fixture.catchesError) {
    assert.ok(answer.ok, `expected the body to catch, got ${JSON.stringify(answer.error)}`);
    assert.equal(typeof answer.result, "string");
    for (const s of want.errorContains || []) assert.ok(answer.result.includes(s), `${answer.result} lacks ${s}`);
    return;
  }
  assert.ok(!answer.ok, `expected a failure, got ${JSON.stringify(answer.result)}`);
  assert.equal(answer.error.code, want.errorCode, JSON.stringify(answer.error));
  if (want.errorLine) assert.equal(answer.error.line, want.errorLine, JSON.stringify(answer.error));
  for (const s of want.errorContains || []) assert.ok(answer.error.message.includes(s), `${answer.error.message} lacks ${s}`);
}

// The WASM calls that reach the call worker: Node has no Web Worker, so they run in the browser
// only (`cargo xtask fixtures --browser`); the rest of the WASM fixtures run here too.
const NEEDS_A_WEB_WORKER = new Set(["wasm-call", "wasm-call-is-a-promise"]);

for (const fixture of fixtures) {
  const skip = typeof Worker === "undefined" && NEEDS_A_WEB_WORKER.has(fixture.name) && "a WASM call runs in a Web Worker, which Node lacks";
  test(fixture.name, { skip }, async () => {
    const runner = createRunner({ wasmUrl: "engine.wasm", fetchImpl: fakeFetch(fixture.modules) });
    globalThis.fetch = fakeFetch(fixture.modules);
    const answer = await runner.run({
      code: fixture.code,
      input: fixture.inputs === undefined ? null : fixture.inputs,
      secrets: fixture.secrets,
      timeoutMs: fixture.timeoutMs,
      modules: fixture.modules.map((m) => m.specifier),
    });
    check(fixture, answer);
  });
}

test("a tampered body is refused, naming the module", async () => {
  const fixture = fixtures.find((f) => f.name === "declared-import");
  const fetchImpl = fakeFetch(fixture.modules, "@acme/nodetool-geo::sandbox/internal/round.js");
  globalThis.fetch = fetchImpl;
  const runner = createRunner({ wasmUrl: "engine.wasm", fetchImpl });
  const answer = await runner.run({ code: fixture.code, modules: ["@acme/geo"] });
  assert.equal(answer.ok, false);
  assert.match(answer.error.message, /@acme\/nodetool-geo::sandbox\/internal\/round\.js failed verification/);
  assert.equal(runner.store.cache.has("@acme/nodetool-geo::sandbox/internal/round.js"), false);
});
