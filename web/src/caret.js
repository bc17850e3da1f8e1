// The caret rule the browser runner shares with the Rust guest (a port of guest/src/caret.rs):
// when the reported line of the body holds the keyword `throw` before the reported column, an
// uncaught throw's caret moves to the last such `throw` before it, the statement that threw;
// otherwise the position stays as reported. Columns count code points.

const WORD = /[\p{L}\p{N}_$]/u;

/** `{line, column}` for an uncaught throw reported at `position` of `body`. */
export function onThrow(body, position) {
  const { line, column } = position || {};
  if (!Number.isFinite(line) || !Number.isFinite(column)) return position;
  const text = String(body).split("\n")[line - 1];
  if (text === undefined) return position;
  const chars = [...text];
  const before = Math.min(column - 1, chars.length);
  let found = -1;
  for (let start = 0; start < before; start++) {
    if (chars.slice(start, start + 5).join("") !== "throw") continue;
    const clearBefore = start === 0 || !WORD.test(chars[start - 1]);
    const clearAfter = start + 5 >= chars.length || !WORD.test(chars[start + 5]);
    if (clearBefore && clearAfter) found = start;
  }
  return found < 0 ? position : { ...position, line, column: found + 1 };
}

/** The most frames `shortStack` keeps (guest/src/caret.rs MAX_STACK_FRAMES). */
export const MAX_STACK_FRAMES = 8;

/**
 * The frames of an engine stack a person can use, innermost first (a port of
 * guest/src/caret.rs short_stack): `at f (body:3:5)` for the body (wrapper lines dropped, each
 * position under the caret rule), `at g (pack::file:12:3)` for a pack file, `at map (native)`;
 * anything else is left out, and so is a stack of one frame.
 */
export function shortStack(stack, body) {
  const bodyLines = String(body).split("\n").length - (String(body).endsWith("\n") ? 1 : 0);
  const frames = [];
  for (const raw of String(stack || "").split("\n")) {
    const frame = raw.trim();
    if (!frame.startsWith("at ")) continue;
    const rest = frame.slice(3);
    const open = rest.lastIndexOf(" (");
    const [name, place] = rest.endsWith(")") && open >= 0 ? [rest.slice(0, open), rest.slice(open + 2, -1)] : ["<anonymous>", rest];
    let shown;
    if (place === "native") shown = "native";
    else if (place.startsWith("code:")) {
      const [l, c] = place.slice(5).split(":").map((n) => Number.parseInt(n, 10));
      const line = l - 1;
      if (!(line >= 1 && line <= bodyLines)) continue;
      const caret = onThrow(body, { line, column: Number.isFinite(c) ? c : undefined });
      shown = Number.isFinite(caret.column) ? `body:${line}:${caret.column}` : `body:${line}`;
    } else {
      const m = /^nodetool-sandbox:([^|]+)\|(.+)$/.exec(place);
      if (!m) continue;
      shown = `${m[1]}::${m[2]}`;
    }
    frames.push(`at ${name} (${shown})`);
    if (frames.length === MAX_STACK_FRAMES) break;
  }
  return frames.length < 2 ? [] : frames;
}
