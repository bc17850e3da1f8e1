// The reference side of `host-modules/tests/subtitle_interop.rs`: reads a JSON array of calls
// from stdin, `{op: "parse", text}` or `{op: "stringify", cues, format}`, answers each as the
// reference's host module does with the `subtitle` library (parseSync keeping the cues'
// start, end and text; stringifySync of `{type: "cue", data}` nodes), and writes a JSON array
// of `{value}` or `{error}`. Run with TZ=UTC. Written for this suite; nothing here is shipped.
import { readFileSync } from "node:fs";
import { parseSync, stringifySync } from "subtitle";

const calls = JSON.parse(readFileSync(0, "utf8"));
const answers = calls.map((call) => {
  try {
    if (call.op === "parse") {
      const value = parseSync(call.text)
        .filter((node) => node.type === "cue" && node.data)
        .map((node) => ({ start: node.data.start, end: node.data.end, text: node.data.text }));
      return { value };
    }
    const nodes = call.cues.map((cue) => ({ type: "cue", data: { ...cue } }));
    return { value: stringifySync(nodes, { format: call.format ?? "SRT" }) };
  } catch (e) {
    return { error: String(e && e.message) };
  }
});
process.stdout.write(JSON.stringify(answers));
