// The reference side of `host-modules/tests/expr_interop.rs`: reads a JSON array of calls
// `{formula, vars}` from stdin, evaluates each as the reference's host module does
// (`new Parser().evaluate(formula, vars)` of expr-eval), and writes a JSON array of `{value}` or
// `{error}`. Numbers JSON cannot hold travel as {"$n": "NaN" | "Infinity" | "-Infinity"},
// functions as {"$fn": true}, undefined as {"$undefined": true}. Written for this suite;
// nothing here is shipped.
import { readFileSync } from "node:fs";
import { Parser } from "expr-eval";

function encode(v) {
  if (typeof v === "number") return Number.isFinite(v) ? v : { $n: String(v) };
  if (typeof v === "function") return { $fn: true };
  if (v === undefined) return { $undefined: true };
  if (Array.isArray(v)) return v.map(encode);
  if (v && typeof v === "object") return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, encode(x)]));
  return v;
}

const calls = JSON.parse(readFileSync(0, "utf8"));
const answers = calls.map(({ formula, vars }) => {
  try {
    return { value: encode(new Parser().evaluate(formula, vars ?? {})) };
  } catch (e) {
    return { error: String(e && e.message) };
  }
});
process.stdout.write(JSON.stringify(answers));
