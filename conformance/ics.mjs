// The reference side of `host-modules/tests/ics_interop.rs`: reads a JSON array of calls from
// stdin, each `{events, header?}`, answers each with the `ics` library (the reference's), and
// writes a JSON array of `{value}` or `{error}` to stdout. Run with TZ=UTC (the host's "local"
// time is UTC). Written for this suite; nothing here is shipped.
import { readFileSync } from "node:fs";
import { createEvents } from "ics";

const calls = JSON.parse(readFileSync(0, "utf8"));
const answers = calls.map(({ events, header }) => {
  try {
    const { error, value } = header ? createEvents(events, header) : createEvents(events);
    return error ? { error: String(error.message ?? error.errors ?? error) } : { value };
  } catch (e) {
    return { error: String(e && e.message) };
  }
});
process.stdout.write(JSON.stringify(answers));
