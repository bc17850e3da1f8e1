// The specifier grammar (a port of protocol/src/names.rs, checked against its cases in
// tests/contract/specifiers.json by test/names.test.mjs): a pack name plus at most one
// subpath segment. Only specifier-shaped imports are declarations; anything else is left for
// the loader to refuse by name.

const MAX_PACKAGE_NAME_CHARS = 214;

function hasControlChar(s) {
  for (const c of s) {
    const code = c.codePointAt(0);
    if (code <= 0x1f || code === 0x7f) return true;
  }
  return false;
}

// Names npm refuses outright (its blacklist).
const BLACKLISTED_PACKAGE_NAMES = ["node_modules", "favicon.ico"];

// A scope or bare-name part: [A-Za-z0-9._~-], not empty, never starting with "." (which also
// refuses "." and "..").
function isPackageSegment(s) {
  return s !== "" && !s.startsWith(".") && /^[A-Za-z0-9._~-]+$/.test(s);
}

function isPackageName(name) {
  if (name.length > MAX_PACKAGE_NAME_CHARS) return false;
  if (name.startsWith("@")) {
    const slash = name.indexOf("/");
    if (slash < 0) return false;
    return isPackageSegment(name.slice(1, slash)) && isPackageSegment(name.slice(slash + 1));
  }
  return isPackageSegment(name) && !name.startsWith("_") && !BLACKLISTED_PACKAGE_NAMES.includes(name);
}

function isModuleName(name) {
  if (hasControlChar(name)) return false;
  if (name === ".") return true;
  if (name === "" || name === ".." || name === "node_modules") return false;
  return /^[A-Za-z0-9._-]+$/.test(name);
}

/** Splits a specifier into [package, module] (module "." for the root), or null. */
export function splitSpecifier(specifier) {
  let packageEnd;
  if (specifier.startsWith("@")) {
    const scopeEnd = specifier.indexOf("/");
    if (scopeEnd < 0) return null;
    const next = specifier.indexOf("/", scopeEnd + 1);
    packageEnd = next < 0 ? specifier.length : next;
  } else {
    const next = specifier.indexOf("/");
    packageEnd = next < 0 ? specifier.length : next;
  }
  const pack = specifier.slice(0, packageEnd);
  const rest = specifier.slice(packageEnd);
  if (!isPackageName(pack)) return null;
  let module;
  if (rest === "") module = ".";
  else if (rest.startsWith("/") && rest !== "/.") module = rest.slice(1);
  else return null;
  if (!isModuleName(module)) return null;
  return [pack, module];
}

/** Whether `s` matches the specifier grammar. */
export function isSpecifier(s) {
  return typeof s === "string" && splitSpecifier(s) !== null;
}

/** The package name a specifier names, or the text itself when it is not specifier-shaped. */
export function packNameOf(specifier) {
  const split = splitSpecifier(specifier);
  return split ? split[0] : specifier;
}
