// The caret rule (src/caret.js), case for case as guest/src/caret.rs tests it.
import { test } from "node:test";
import assert from "node:assert/strict";

import { onThrow } from "../src/caret.js";

test("an uncaught throw's caret goes to its throw", () => {
  const body = "const x = 1;\n  throw new Error(`bad ${x}`);";
  assert.deepEqual(onThrow(body, { line: 2, column: 30 }), { line: 2, column: 3 });
  assert.deepEqual(onThrow(body, { line: 1, column: 7 }), { line: 1, column: 7 });
  assert.deepEqual(onThrow("rethrow(throwable.x); f()", { line: 1, column: 22 }), { line: 1, column: 22 });
  const two = "if (a) throw 1; else throw new Error(`${a}`)";
  assert.deepEqual(onThrow(two, { line: 1, column: 42 }), { line: 1, column: 22 });
  assert.deepEqual(onThrow(two, { line: 9, column: 1 }), { line: 9, column: 1 });
  assert.deepEqual(onThrow(two, {}), {});
});

test("a short stack names body lines and pack files, as the Rust guest's does", async () => {
  const { shortStack, MAX_STACK_FRAMES } = await import("../src/caret.js");
  const stack = "    at round (nodetool-sandbox:@acme/geo|sandbox/internal/round.js:1:40)\n    at f (code:4:10)\n    at map (native)\n    at <anonymous> (code:6:11)\n    at <anonymous> (code:8:1)\n    at guard (nodetool-sandbox:prelude:3:1)\n";
  assert.deepEqual(shortStack(stack, "a\nb\nc\nd\ne"), [
    "at round (@acme/geo::sandbox/internal/round.js:1:40)",
    "at f (body:3:10)",
    "at map (native)",
    "at <anonymous> (body:5:11)",
  ]);
  assert.deepEqual(shortStack("    at f (code:2:3)\n", "a"), []);
  assert.deepEqual(shortStack("garbage\n\n", "a"), []);
  assert.equal(shortStack("    at f (code:2:3)\n".repeat(100), "a\nb").length, MAX_STACK_FRAMES);
  assert.equal(shortStack("    at f (code:3:20)\n    at g (code:4:1)\n", "function f() {\n  throw new Error(`${1}`);\n}")[0], "at f (body:2:3)");
});
