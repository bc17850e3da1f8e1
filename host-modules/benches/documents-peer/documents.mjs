// The reference's document libraries on the files `cargo xtask bench documents` writes:
// pdf-parse (pdf.js) getText and mammoth extractRawText, as NodeTool's host modules call them.
// Prints one line per library: its name, median milliseconds, text length, and whether its text
// equals ours (the bench writes ours beside the inputs as <input>.ours.txt).
import { existsSync, readFileSync } from "node:fs";
import { PDFParse } from "pdf-parse";
import mammoth from "mammoth";

const [pdfPath, docxPath, runsArg] = process.argv.slice(2);
const runs = Number(runsArg ?? 15);
const pdf = readFileSync(pdfPath);
const docx = readFileSync(docxPath);

async function time(fn) {
  for (let i = 0; i < 3; i++) await fn();
  const samples = [];
  let out;
  for (let i = 0; i < runs; i++) {
    const t = process.hrtime.bigint();
    out = await fn();
    samples.push(Number(process.hrtime.bigint() - t) / 1e6);
  }
  samples.sort((a, b) => a - b);
  return { medianMs: samples[Math.floor(samples.length / 2)], minMs: samples[0], chars: out.length, text: out };
}

const pdfParse = await time(async () => {
  const parser = new PDFParse({ data: new Uint8Array(pdf) });
  try {
    const result = await parser.getText({ pageJoiner: "" });
    return result.pages.map((p) => p.text.trim()).join("\n\n");
  } finally {
    await parser.destroy();
  }
});
const mammothRaw = await time(async () => (await mammoth.extractRawText({ buffer: docx })).value);
console.log(`node ${process.version} 0`);
const same = (path, text) => existsSync(path) && readFileSync(path, "utf8") === text;
console.log(`pdf-parse ${pdfParse.medianMs} ${pdfParse.chars} ${same(pdfPath + ".ours.txt", pdfParse.text)}`);
console.log(`mammoth ${mammothRaw.medianMs} ${mammothRaw.chars} ${same(docxPath + ".ours.txt", mammothRaw.text)}`);
