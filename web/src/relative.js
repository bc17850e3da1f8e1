// The relative-import rule of the browser runner: how a `./` or `../` request inside a pack
// names one of the pack's files. The Rust loader and discovery use
// nodetool_jssource::relative; this copy (the browser cannot call Rust) is checked against the
// same cases, exported as tests/contract/relative.json, by web/test/relative.test.mjs.

/** Whether `request` is relative (`./…` or `../…`). */
export function isRelative(request) {
  return request.startsWith("./") || request.startsWith("../");
}

/**
 * Joins `request` onto the directory of the file `importer`, or null when it climbs out of the
 * package or names the root itself. Empty and `.` segments are skipped, `..` removes one.
 */
export function joinRelative(importer, request) {
  const segments = importer.split("/");
  segments.pop();
  for (const part of request.split("/")) {
    if (part === "" || part === ".") continue;
    if (part === "..") {
      if (!segments.length) return null;
      segments.pop();
    } else segments.push(part);
  }
  return segments.length ? segments.join("/") : null;
}

/** The files a joined request may land on, in the order every loader tries them. */
export function relativeCandidates(target) {
  return [target, `${target}.js`, `${target}/index.js`];
}

/** The file id a relative request names before candidates are tried, or null. */
export function relativeFile(importer, request) {
  return isRelative(request) ? joinRelative(importer, request) : null;
}
