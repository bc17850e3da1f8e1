// The reference side of `cargo xtask conformance`: reads a JSON array of calls, answers each
// with the libraries the reference's host modules use, called with the options its contract
// fixes, and writes a JSON array of answers ({ok: value} or {error: message}). Bytes travel as
// {"$hex": "..."}. Written for this suite; nothing here is shipped.
import { readFileSync, writeFileSync } from "node:fs";
import Papa from "papaparse";
import { XMLParser, XMLValidator } from "fast-xml-parser";
import * as cheerio from "cheerio";
import TurndownService from "turndown";
import { createTwoFilesPatch } from "diff";
import { unzipSync, zipSync, strToU8 } from "fflate";
import ExcelJS from "exceljs";

import { readdirSync } from "node:fs";
import { createRequire } from "node:module";
import vm from "node:vm";

const [input, output] = process.argv.slice(2);

// `--published OUT`: the published inputs this suite replays — csv-spectrum's files and the
// inputs of papaparse's own test cases (its tests/test-cases.js, evaluated with stand-ins for
// its test runner so only the case tables are read).
function published() {
  const require = createRequire(import.meta.url);
  const spectrum = require.resolve("csv-spectrum/package.json").replace(/package\.json$/, "csvs/");
  const csvSpectrum = readdirSync(spectrum)
    .filter((f) => f.endsWith(".csv"))
    .sort()
    .map((f) => ({ name: f, text: readFileSync(spectrum + f, "utf8") }));
  const file = require.resolve("papaparse/tests/test-cases.js");
  const noop = () => {};
  noop.skip = noop;
  noop.only = noop;
  const context = vm.createContext({
    module: { exports: {} },
    require: (name) => (name === "chai" ? { assert: new Proxy({}, { get: () => noop }) } : Papa),
    describe: noop,
    it: noop,
    document: undefined,
    setTimeout,
    console: { log: noop, warn: noop },
  });
  vm.runInContext(readFileSync(file, "utf8"), context, { filename: "test-cases.js" });
  const plain = (config) =>
    Object.fromEntries(Object.entries(config || {}).filter(([, v]) => ["string", "boolean"].includes(typeof v)));
  const parse = [...(context.CORE_PARSER_TESTS || []), ...(context.PARSE_TESTS || [])]
    .filter((t) => typeof t.input === "string")
    .map((t) => ({ name: t.description, text: t.input, config: plain(t.config) }));
  const unparse = (context.UNPARSE_TESTS || [])
    .filter((t) => Array.isArray(t.input))
    .map((t) => ({ name: t.description, rows: t.input, config: plain(t.config) }));
  return { csvSpectrum, parse, unparse };
}

if (input === "--published") {
  writeFileSync(output, JSON.stringify(published()));
  process.exit(0);
}

const toBytes = (v) => Buffer.from(v.$hex, "hex");
const decode = (v) => {
  if (Array.isArray(v)) return v.map(decode);
  if (v && typeof v === "object") {
    if (typeof v.$hex === "string") return new Uint8Array(toBytes(v));
    return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, decode(x)]));
  }
  return v;
};
const encode = (v) => {
  if (v instanceof Uint8Array) return { $hex: Buffer.from(v).toString("hex") };
  if (Array.isArray(v)) return v.map(encode);
  if (v && typeof v === "object") {
    return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, encode(x)]));
  }
  return v === undefined ? null : v;
};

const options = (o) => (o && typeof o === "object" && !Array.isArray(o) ? o : {});

function csvParse(text, opts) {
  const o = options(opts);
  const header = o.header === undefined ? true : Boolean(o.header);
  const delimiter = o.delimiter === undefined || o.delimiter === null ? "" : String(o.delimiter);
  return Papa.parse(text, { header, delimiter, dynamicTyping: false, skipEmptyLines: true }).data;
}

function csvStringify(rows, opts) {
  const o = options(opts);
  return Papa.unparse(rows, {
    delimiter: o.delimiter === undefined ? "," : String(o.delimiter),
    header: o.header === undefined ? true : Boolean(o.header),
    newline: "\n",
  });
}

function xmlParse(text, opts) {
  const o = options(opts);
  const valid = XMLValidator.validate(text);
  if (valid !== true) throw new Error(`xml.parse: invalid XML (${valid.err.msg})`);
  const parser = new XMLParser({
    ignoreAttributes: o.attributes === false,
    attributeNamePrefix: "@_",
    parseTagValue: false,
    parseAttributeValue: false,
    trimValues: true,
  });
  return parser.parse(text);
}

function htmlSelect(html, selector, opts) {
  const o = options(opts);
  const limit = Math.min(Math.max(Math.floor(Number(o.limit ?? 100)), 0), 1000);
  const $ = cheerio.load(html);
  const found = $(selector);
  const out = [];
  for (let i = 0; i < found.length && out.length < limit; i++) {
    const one = found.eq(i);
    if (o.attr) {
      const v = one.attr(String(o.attr));
      if (v !== undefined && v !== null) out.push(String(v));
    } else out.push(one.text().trim());
  }
  return out;
}

function htmlToText(html) {
  const $ = cheerio.load(html);
  $("script, style").remove();
  return $.root().text().replace(/[ \t]+/g, " ").replace(/\n{3,}/g, "\n\n").trim();
}

function htmlLinks(html, base) {
  const $ = cheerio.load(html);
  const b = base === undefined || base === null ? "" : String(base);
  const internal = (href) => {
    if (!href || href.startsWith("#")) return true;
    if (/^(mailto|tel|javascript):/i.test(href)) return false;
    if (b) {
      try {
        return new URL(href, b).origin === new URL(b).origin;
      } catch {}
    }
    return !/^[a-z][a-z0-9+.-]*:|^\/\//i.test(href);
  };
  const out = [];
  $("a[href]").each((_, el) => {
    if (out.length >= 1000) return;
    const href = $(el).attr("href") ?? "";
    out.push({ href, text: $(el).text().trim(), type: internal(href) ? "internal" : "external" });
  });
  return out;
}

function htmlToMarkdown(html) {
  const service = new TurndownService({ headingStyle: "atx", codeBlockStyle: "fenced", bulletListMarker: "-" });
  return service.turndown(html);
}

function diffUnified(a, b, opts) {
  const o = options(opts);
  const raw = Number(o.context ?? 3);
  const context = Number.isFinite(raw) ? Math.min(Math.max(Math.floor(raw), 0), 100) : 3;
  const oldName = typeof o.oldName === "string" ? o.oldName : "a";
  const newName = typeof o.newName === "string" ? o.newName : "b";
  return createTwoFilesPatch(oldName, newName, a, b, undefined, undefined, { context });
}

function zipUnzip(bytes) {
  const files = unzipSync(bytes);
  // fflate lists directories as entries of no bytes ending in "/"; the contract skips them.
  return Object.fromEntries(Object.entries(files).filter(([name]) => !name.endsWith("/")));
}

function zipZip(files) {
  const entries = {};
  for (const [name, v] of Object.entries(files)) entries[name] = typeof v === "string" ? strToU8(v) : v;
  return zipSync(entries);
}

function cellValue(v) {
  if (v === null || v === undefined) return null;
  if (v instanceof Date) return v.toISOString();
  if (typeof v === "object") {
    if ("formula" in v || "sharedFormula" in v) return cellValue(v.result);
    if ("richText" in v) return v.richText.map((r) => r.text).join("");
    if ("text" in v && "hyperlink" in v) return cellValue(v.text);
    if ("error" in v) return v.error;
  }
  return v;
}

async function xlsxParse(bytes, opts) {
  const o = options(opts);
  const header = o.header === undefined ? true : Boolean(o.header);
  const book = new ExcelJS.Workbook();
  await book.xlsx.load(bytes);
  const sheets = {};
  book.eachSheet((sheet) => {
    const rows = [];
    sheet.eachRow((row) => {
      const values = [];
      for (let c = 1; c <= row.cellCount; c++) values.push(cellValue(row.getCell(c).value));
      while (values.length && values[values.length - 1] === null) values.pop();
      rows.push(values);
    });
    if (!header) {
      sheets[sheet.name] = rows;
      return;
    }
    const [head = [], ...body] = rows;
    const width = Math.max(head.length, ...body.map((r) => r.length));
    const keys = [];
    for (let c = 0; c < width; c++) {
      const k = head[c];
      keys.push(k === null || k === undefined || k === "" ? `col_${c + 1}` : String(k));
    }
    sheets[sheet.name] = body.map((r) => {
      const record = {};
      keys.forEach((k, c) => (record[k] = r[c] ?? null));
      return record;
    });
  });
  return sheets;
}

const calls = {
  "csv.parse": csvParse,
  "csv.stringify": csvStringify,
  "xml.parse": xmlParse,
  "html.select": htmlSelect,
  "html.toText": htmlToText,
  "html.extractLinks": htmlLinks,
  "html.toMarkdown": htmlToMarkdown,
  "diff.unified": diffUnified,
  "zip.unzip": zipUnzip,
  "zip.zip": zipZip,
  "xlsx.parse": xlsxParse,
};

const requests = JSON.parse(readFileSync(input, "utf8"));
const answers = [];
for (const { call, args } of requests) {
  try {
    answers.push({ ok: encode(await calls[call](...decode(args))) });
  } catch (e) {
    answers.push({ error: String(e && e.message ? e.message : e) });
  }
}
writeFileSync(output, JSON.stringify(answers));
