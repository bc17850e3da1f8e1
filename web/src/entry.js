// The entry builder (a port of guest/src/entry.rs): a Code node body becomes an ES module.
// Static import declarations are hoisted onto the entry's first line, ahead of an async
// wrapper whose result is the module's default export, and the ranges they vacated are
// blanked, so line n of the body is line n + 1 of the entry with every column unchanged.

import { Parser } from "acorn";

export const ENTRY_LINE_OFFSET = 1;
export const ENTRY_MODULE_NAME = "code";

const WRAPPER_OPEN = "export default await (async () => {";
const WRAPPER_CLOSE = "\n})();\n";

const EXPORT_MESSAGE =
  "SyntaxError: a Code node body cannot export; it has no importers. Return the result with `return` instead";

/** A body that does not parse: `{message, line, column}` (1-based). */
export class BodySyntaxError extends Error {
  constructor(message, line, column) {
    super(message);
    this.line = line;
    this.column = column;
  }
}

/** 1-based line and column of a UTF-16 offset. */
export function position(source, offset) {
  const before = source.slice(0, Math.min(offset, source.length));
  const line = before.split("\n").length;
  const lineStart = before.lastIndexOf("\n") + 1;
  return { line, column: [...before.slice(lineStart)].length + 1 };
}

function parse(body) {
  try {
    return Parser.parse(body, {
      ecmaVersion: "latest",
      sourceType: "module",
      allowReturnOutsideFunction: true,
      allowAwaitOutsideFunction: true,
      allowHashBang: false,
    });
  } catch (e) {
    if (e instanceof SyntaxError && typeof e.pos === "number") {
      const { line, column } = position(body, e.pos);
      // acorn appends "(line:column)"; the position travels separately.
      const message = String(e.message).replace(/\s*\(\d+:\d+\)$/, "");
      throw new BodySyntaxError(`SyntaxError: ${message}`, line, column);
    }
    throw new BodySyntaxError("SyntaxError: the body could not be parsed", 1, 1);
  }
}

/** Builds the entry module: `{source, imports: [{specifier, line, column}]}`. */
export function buildEntry(body) {
  const program = parse(body);
  const blanked = body.split("");
  const hoisted = [];
  const imports = [];
  for (const statement of program.body) {
    if (statement.type === "ImportDeclaration") {
      const text = body.slice(statement.start, statement.end);
      let oneLine = text.replace(/[\n\r]/g, " ");
      if (!oneLine.trimEnd().endsWith(";")) oneLine += ";";
      hoisted.push(oneLine);
      for (let i = statement.start; i < statement.end; i++) {
        if (blanked[i] !== "\n" && blanked[i] !== "\r") blanked[i] = " ";
      }
      const { line, column } = position(body, statement.source.start);
      imports.push({ specifier: statement.source.value, line, column });
    } else if (
      statement.type === "ExportNamedDeclaration" ||
      statement.type === "ExportDefaultDeclaration" ||
      statement.type === "ExportAllDeclaration"
    ) {
      const { line, column } = position(body, statement.start);
      throw new BodySyntaxError(EXPORT_MESSAGE, line, column);
    }
  }
  let source = hoisted.join(" ");
  if (hoisted.length) source += " ";
  source += `${WRAPPER_OPEN}\n${blanked.join("")}${WRAPPER_CLOSE}`;
  return { source, imports };
}

/** The body's static import specifiers, in order, without duplicates. */
export function bodyImports(body) {
  const seen = new Set();
  return buildEntry(body).imports.filter((i) => !seen.has(i.specifier) && seen.add(i.specifier));
}
