// Module delivery: bodies fetched by opaque id from the server's delivery route
// (GET /api/sandbox-modules/{id}), each verified against its X-Content-Sha256 with
// crypto.subtle before anything uses it, cached per id and revalidated by its graph digest
// (the route's ETag), and the closure of a run's modules walked through
// X-Sandbox-Module-Dependencies before the run starts, so the QuickJS loader stays synchronous.
// A body that does not match its hash is never cached, never returned and never run.

const ROUTE = "/api/sandbox-modules/";
const SEPARATOR = "::";

/** A failure to obtain a module, naming it; `code` is the run error code it becomes. */
export class DeliveryError extends Error {
  constructor(code, message, specifier) {
    super(message);
    this.code = code;
    this.specifier = specifier;
  }
}

/** The URL path of a delivery id: every segment percent-encoded (ids contain "/"). */
export function deliveryPath(id) {
  return ROUTE + id.split("/").map(encodeURIComponent).join("/");
}

/** Whether an id can travel in a URL path unchanged (no empty, "." or ".." segment, which a
 * URL parser would collapse). Such ids name nothing the catalog serves. */
export function isDeliverableId(id) {
  return typeof id === "string" && id !== "" && id.split("/").every((s) => s !== "" && s !== "." && s !== ".." && !/^(\.|%2e){1,2}$/i.test(s));
}

function hex(buffer) {
  return Array.from(new Uint8Array(buffer), (b) => b.toString(16).padStart(2, "0")).join("");
}

/** SHA-256 of bytes as lowercase hex, with the page's crypto.subtle (never a fallback). */
export async function sha256Hex(bytes) {
  const subtle = globalThis.crypto && globalThis.crypto.subtle;
  if (!subtle) {
    throw new DeliveryError(
      "module-unavailable",
      "this page is not a secure context, so module bodies cannot be verified (open it over https or from localhost)",
    );
  }
  return hex(await subtle.digest("SHA-256", bytes));
}

function header(response, name) {
  const value = response.headers.get(name);
  return value === null ? undefined : value;
}

function jsonHeader(response, name, what) {
  const text = header(response, name);
  if (text === undefined) return undefined;
  try {
    return JSON.parse(text);
  } catch (_) {
    throw new Error(`its ${what} header is not JSON`);
  }
}

/** The per-page store of verified module bodies. */
export class ModuleStore {
  constructor({ fetchImpl } = {}) {
    this.fetchImpl = fetchImpl || ((...args) => globalThis.fetch(...args));
    /** id -> verified record */
    this.cache = new Map();
    this.stats = { fetched: 0, revalidated: 0, refused: 0 };
  }

  /** One verified record by delivery id, or a thrown DeliveryError. */
  async fetchOne(id, { signal, specifier } = {}) {
    const cached = this.cache.get(id);
    let response = await this.request(id, cached, signal, specifier);
    if (response.status === 304) {
      if (cached && header(response, "x-content-sha256") === cached.sha256) {
        this.stats.revalidated++;
        return cached;
      }
      // A 304 for something this page never verified (or whose hash moved): ask again in full.
      this.cache.delete(id);
      response = await this.request(id, undefined, signal, specifier);
    }
    if (response.status === 404 || response.status === 403) {
      let detail = "";
      try {
        detail = (await response.json()).detail || "";
      } catch (_) {
        detail = "";
      }
      const error = new DeliveryError("module-not-found", detail || `Sandbox module ${id} is not installed.`, specifier);
      error.status = response.status;
      error.detail = detail;
      throw error;
    }
    if (response.status !== 200) {
      throw new DeliveryError("module-unavailable", `Sandbox module ${id} could not be fetched (HTTP ${response.status}).`, specifier);
    }
    const bytes = new Uint8Array(await response.arrayBuffer());
    const expected = header(response, "x-content-sha256");
    if (!expected || !/^[0-9a-f]{64}$/.test(expected)) {
      throw new DeliveryError("module-unavailable", `Sandbox module ${id} came without a valid X-Content-Sha256, so it was not run.`, specifier);
    }
    const actual = await sha256Hex(bytes);
    if (actual !== expected) {
      this.cache.delete(id);
      this.stats.refused++;
      throw new DeliveryError(
        "module-unavailable",
        `Sandbox module ${id} failed verification: its body's SHA-256 is ${actual}, but X-Content-Sha256 says ${expected}. It was not cached or run.`,
        specifier,
      );
    }
    let record;
    try {
      record = this.record(id, response, bytes, actual);
    } catch (e) {
      throw new DeliveryError("module-unavailable", `Sandbox module ${id}: ${e.message}.`, specifier);
    }
    this.stats.fetched++;
    this.cache.set(id, record);
    return record;
  }

  async request(id, cached, signal, specifier) {
    const headers = {};
    if (cached) headers["if-none-match"] = `"${cached.digest}"`;
    try {
      return await this.fetchImpl(deliveryPath(id), { headers, cache: "no-store", signal, credentials: "same-origin" });
    } catch (e) {
      throw new DeliveryError("module-unavailable", `Sandbox module ${id} could not be fetched: ${e.message}`, specifier);
    }
  }

  record(id, response, bytes, sha256) {
    const mediaType = (header(response, "content-type") || "").split(";")[0].trim();
    const packName = header(response, "x-sandbox-pack");
    const fileId = header(response, "x-sandbox-file-id");
    const digest = header(response, "x-content-digest");
    if (!packName || !fileId || !digest) throw new Error("the delivery lacks its X-Sandbox-Pack, X-Sandbox-File-Id or X-Content-Digest header");
    const dependencies = jsonHeader(response, "x-sandbox-module-dependencies", "X-Sandbox-Module-Dependencies") || [];
    if (!Array.isArray(dependencies) || !dependencies.every((d) => typeof d === "string")) {
      throw new Error("its X-Sandbox-Module-Dependencies header is not a list of ids");
    }
    const record = {
      id,
      fileId,
      packName,
      packVersion: header(response, "x-sandbox-pack-version"),
      digest,
      sha256,
      internal: header(response, "x-sandbox-internal") === "1",
      dependencies,
      mediaType,
      wasm: jsonHeader(response, "x-sandbox-wasm-contract", "X-Sandbox-Wasm-Contract"),
      hostId: header(response, "x-sandbox-host-module"),
    };
    if (mediaType === "application/wasm") {
      record.bytes = bytes;
    } else if (mediaType === "text/javascript") {
      try {
        record.source = new TextDecoder("utf-8", { fatal: true }).decode(bytes);
      } catch (_) {
        throw new Error("its body is not UTF-8");
      }
    } else {
      throw new Error(`its media type ${JSON.stringify(mediaType)} is neither JavaScript nor WASM`);
    }
    return record;
  }

  /**
   * Fetches and verifies each specifier's whole graph. Returns `{modules, missing}`: the
   * resolved modules (the same shape as the catalog's ResolvedModule) and, per specifier the
   * route refused, its DeliveryError. An integrity failure or a broken graph throws.
   */
  async resolve(specifiers, { signal } = {}) {
    const modules = [];
    const missing = [];
    const roots = await Promise.all(
      specifiers.map((specifier) =>
        this.fetchOne(specifier, { signal, specifier }).then(
          (record) => ({ specifier, record }),
          (error) => ({ specifier, error }),
        ),
      ),
    );
    for (const { specifier, error } of roots) {
      if (!error) continue;
      if (error.status === 404 || error.status === 403) missing.push(error);
      else throw error;
    }
    for (const { specifier, record } of roots) {
      if (!record) continue;
      modules.push(await this.module(specifier, record, signal));
    }
    return { modules, missing };
  }

  /** A resolved module from its root record, walking the dependency closure. */
  async module(specifier, root, signal) {
    const base = {
      specifier,
      packName: root.packName,
      packVersion: root.packVersion,
      contentDigest: root.digest,
      moduleId: root.fileId,
    };
    if (root.hostId !== undefined) {
      if (root.mediaType !== "text/javascript") throw new DeliveryError("module-unavailable", `Sandbox module ${specifier}: a host facade must be JavaScript.`, specifier);
      return { ...base, kind: "host", hostId: root.hostId, graph: [] };
    }
    if (root.mediaType === "application/wasm") {
      if (!root.wasm) throw new DeliveryError("module-unavailable", `Sandbox module ${specifier}: a WASM entry came without its X-Sandbox-Wasm-Contract.`, specifier);
      return {
        ...base,
        kind: "wasm",
        wasm: root.wasm,
        graph: [{ id: root.fileId, internal: root.internal, dependencies: [], bytes: root.bytes, sha256: root.sha256 }],
      };
    }
    const files = new Map();
    const prefix = root.packName + SEPARATOR;
    let frontier = [root];
    files.set(root.fileId, root);
    while (frontier.length) {
      const next = [];
      for (const record of frontier) {
        for (const dep of record.dependencies) {
          if (!dep.startsWith(prefix)) {
            throw new DeliveryError("module-unavailable", `Sandbox module ${specifier}: ${record.id} depends on ${dep}, which is not a file of ${root.packName}.`, specifier);
          }
          const fileId = dep.slice(prefix.length);
          if (!files.has(fileId)) {
            files.set(fileId, null);
            next.push(dep);
          }
        }
      }
      const fetched = await Promise.all(
        next.map((dep) =>
          this.fetchOne(dep, { signal, specifier }).catch((error) => {
            if (error instanceof DeliveryError && (error.status === 404 || error.status === 403)) {
              throw new DeliveryError("module-unavailable", `Sandbox module ${specifier}: its file ${dep} could not be delivered: ${error.message}`, specifier);
            }
            throw error;
          }),
        ),
      );
      for (const record of fetched) {
        if (record.packName !== root.packName || record.mediaType !== "text/javascript") {
          throw new DeliveryError("module-unavailable", `Sandbox module ${specifier}: ${record.id} is not a JavaScript file of ${root.packName}.`, specifier);
        }
        files.set(record.fileId, record);
      }
      frontier = fetched;
    }
    const graph = [...files.values()]
      .map((r) => ({
        id: r.fileId,
        internal: r.internal,
        dependencies: r.dependencies.map((d) => d.slice(prefix.length)).sort(),
        source: r.source,
      }))
      .sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
    return { ...base, kind: "js", graph };
  }
}
