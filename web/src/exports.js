// The missing-export link error in the body's terms (a port of guest/src/exports.rs): QuickJS
// says `Could not find export 'x' in module '<engine name>'`, naming the loader's internal
// module id and no position; the run answers `missing-export` on the imported name, naming
// the specifier the body wrote and the closest export. No engine module id survives in a
// message: a pack file is named `pack::file`.

import { Parser } from "acorn";

import { position } from "./entry.js";
import { hostModule } from "./facade.js";
import { relativeCandidates, relativeFile } from "./relative.js";

const MODULE_PREFIX = "nodetool-sandbox:";
const MAX_STAR_DEPTH = 16;
const MAX_SUGGESTED_NAME = 128;

function parseModule(source) {
  try {
    return Parser.parse(source, {
      ecmaVersion: "latest",
      sourceType: "module",
      allowReturnOutsideFunction: true,
      allowAwaitOutsideFunction: true,
    });
  } catch (_) {
    return null;
  }
}

function exportName(node) {
  return node.type === "Literal" ? String(node.value) : node.name;
}

/** The names a body's static imports name: [{specifier, name, line, column}]. */
export function importedNames(body) {
  const program = parseModule(body);
  if (!program) return [];
  const out = [];
  for (const statement of program.body) {
    if (statement.type !== "ImportDeclaration") continue;
    for (const s of statement.specifiers) {
      let name;
      let at;
      if (s.type === "ImportSpecifier") {
        name = exportName(s.imported);
        at = s.imported.start;
      } else if (s.type === "ImportDefaultSpecifier") {
        name = "default";
        at = s.local.start;
      } else continue;
      out.push({ specifier: statement.source.value, name, ...position(body, at) });
    }
  }
  return out;
}

function jsExports(module, fileId, depth, names) {
  if (depth > MAX_STAR_DEPTH) return false;
  const file = module.graph.find((f) => f.id === fileId);
  if (!file || typeof file.source !== "string") return false;
  const program = parseModule(file.source);
  if (!program) return false;
  for (const statement of program.body) {
    if (statement.type === "ExportNamedDeclaration") {
      for (const s of statement.specifiers) names.add(exportName(s.exported));
      const d = statement.declaration;
      if (d && d.type === "VariableDeclaration") {
        for (const declarator of d.declarations) for (const id of bindingNames(declarator.id)) names.add(id);
      } else if (d && d.id) names.add(d.id.name);
    } else if (statement.type === "ExportDefaultDeclaration") {
      names.add("default");
    } else if (statement.type === "ExportAllDeclaration") {
      if (statement.exported) names.add(exportName(statement.exported));
      else {
        const joined = relativeFile(fileId, statement.source.value);
        if (joined === null) return false;
        // The file the loader would serve: the first candidate in the graph.
        const target = relativeCandidates(joined).find((c) => module.graph.some((f) => f.id === c));
        if (target === undefined) return false;
        const hadDefault = names.has("default");
        if (!jsExports(module, target, depth + 1, names)) return false;
        if (!hadDefault) names.delete("default");
      }
    }
  }
  return true;
}

function bindingNames(pattern) {
  const out = [];
  const stack = [pattern];
  while (stack.length) {
    const p = stack.pop();
    if (!p) continue;
    if (p.type === "Identifier") out.push(p.name);
    else if (p.type === "ObjectPattern") for (const prop of p.properties) stack.push(prop.type === "RestElement" ? prop.argument : prop.value);
    else if (p.type === "ArrayPattern") for (const e of p.elements) stack.push(e);
    else if (p.type === "RestElement") stack.push(p.argument);
    else if (p.type === "AssignmentPattern") stack.push(p.left);
  }
  return out;
}

/** What a resolved module exports (a Set), or null when that cannot be told. */
export function moduleExports(module) {
  if (module.kind === "wasm") return new Set(module.wasm.exports.map((e) => e.as));
  if (module.kind === "host") {
    const spec = hostModule(module.hostId);
    return spec ? new Set([...spec.exports, "default"]) : null;
  }
  const names = new Set();
  return jsExports(module, module.moduleId, 0, names) ? names : null;
}

function editDistance(a, b) {
  const bc = [...b];
  const row = Array.from({ length: bc.length + 1 }, (_, i) => i);
  let i = 0;
  for (const ca of a) {
    let diagonal = row[0];
    row[0] = ++i;
    for (let j = 0; j < bc.length; j++) {
      const above = row[j + 1];
      row[j + 1] = ca === bc[j] ? diagonal : 1 + Math.min(diagonal, above, row[j]);
      diagonal = above;
    }
  }
  return row[bc.length];
}

/** The candidate closest to `name` (case first, then edit distance within a third), or null. */
export function closest(name, candidates) {
  const length = [...name].length;
  if (length > MAX_SUGGESTED_NAME) return null;
  const lower = name.toLowerCase();
  const limit = Math.max(1, Math.floor(length / 3));
  let best = null;
  // Sorted as Rust's BTreeSet iterates (by UTF-8 bytes; code-point order), so ties agree.
  const sorted = [...candidates].sort((x, y) => (x < y ? -1 : x > y ? 1 : 0));
  for (const candidate of sorted) {
    if (candidate === name || [...candidate].length > MAX_SUGGESTED_NAME) continue;
    const distance = candidate.toLowerCase() === lower ? 0 : editDistance(lower, candidate.toLowerCase());
    if (distance <= limit && (best === null || distance < best.distance)) best = { distance, candidate };
  }
  return best ? best.candidate : null;
}

function missingMessage(specifier, name) {
  return name === "default"
    ? `"${specifier}" has no default export; import its named exports instead`
    : `"${specifier}" has no export named "${name}"`;
}

/** Every engine module name in `message` as `pack::file`. */
export function scrubModuleIds(message) {
  return message.replace(/nodetool-sandbox:([^|'"\s)]+)\|([^'"\s)]+)/g, "$1::$2");
}

function engineFile(m) {
  if (m.kind === "wasm") return `wasm:${m.moduleId}`;
  if (m.kind === "host") return `host:${m.hostId}`;
  return m.moduleId;
}

/** The run error for a failed link (see the header); any other error passes through. */
export function explainLinkError(error, body, modules) {
  // Only the engine's link error names an engine module id on its own; a denial echoes what
  // the body itself wrote, and is left as written.
  if (!error || typeof error.message !== "string" || !error.message.includes(MODULE_PREFIX)) return error;
  if (!error.message.includes("Could not find export '")) return error;
  const scrubbed = { ...error, message: scrubModuleIds(error.message) };
  const m = /Could not find export '([^']*)' in module 'nodetool-sandbox:([^|']*)\|([^']*)'/.exec(error.message);
  if (!m) return scrubbed;
  const [, name, pack, file] = m;
  const module = modules.find((x) => x.packName === pack && engineFile(x) === file);
  if (!module) return scrubbed;
  const imp = importedNames(body).find((i) => i.specifier === module.specifier && i.name === name);
  if (!imp) return scrubbed;
  const exports = moduleExports(module);
  const suggestion = exports && !exports.has(name) ? closest(name, exports) : null;
  const message = suggestion
    ? `${missingMessage(module.specifier, name)}; did you mean ${suggestion}?`
    : missingMessage(module.specifier, name);
  return { code: "missing-export", message, line: imp.line, column: imp.column, specifier: module.specifier };
}
