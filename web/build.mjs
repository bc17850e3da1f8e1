// Builds the browser runner into dist/ (never committed): the page API (runner.js), the
// runner's worker (runner-worker.js), the WASM call worker (wasm-worker.js), each bundled
// as an ES module by esbuild, and QuickJS's emscripten-module.wasm copied beside them.
import { build } from "esbuild";
import { copyFile, mkdir, rm } from "node:fs/promises";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const dist = join(here, "dist");
await rm(dist, { recursive: true, force: true });
await mkdir(dist, { recursive: true });
await build({
  entryPoints: {
    runner: join(here, "src/runner.js"),
    "runner-worker": join(here, "src/worker.js"),
    "wasm-worker": join(here, "src/wasm-worker.js"),
  },
  outdir: dist,
  bundle: true,
  format: "esm",
  platform: "browser",
  target: ["chrome120", "firefox121", "safari17"],
  minify: false,
  sourcemap: false,
  legalComments: "inline",
  logLevel: "warning",
});
const require = createRequire(import.meta.url);
const variantDir = dirname(require.resolve("@jitl/quickjs-ng-wasmfile-release-sync/package.json"));
await copyFile(join(variantDir, "dist/emscripten-module.wasm"), join(dist, "emscripten-module.wasm"));
console.log("built web/dist (runner.js, runner-worker.js, wasm-worker.js, emscripten-module.wasm)");
