// The sandbox boundary: a body may import only sandbox packs that are installed. Node builtins
// such as node:fs do not exist in the guest, so this body fails before any line of it runs.
// Run: nodetool run examples/denied.js
// Expected: an error naming node:fs. The catalog offers no such module (module-not-found:
// "Sandbox module node:fs is not installed."), and the guest loader would refuse the import
// on its own anyway (module-denied: "node:fs" is not a sandbox package this run serves).
import { readFileSync } from "node:fs";

return readFileSync("/etc/passwd", "utf8");
