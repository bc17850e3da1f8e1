//! What the document modules allocate on hostile input, measured: a counting allocator wraps
//! the system's, and each crafted file (built before the measurement starts) must be answered
//! with its module's error while the peak of live bytes stays within the cap that stops it, not
//! the size the file claims or would inflate to.
//!
//! One test, run alone in its binary, so no other test's allocations mix into the peaks.

#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::io::Write;
use std::sync::atomic::{AtomicUsize, Ordering};

use nodetool_host_modules::implementation;
use nodetool_protocol::value::Value;

struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call forwards to `System` with the caller's layout unchanged; the counters are
// only arithmetic beside it.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract for `alloc` is passed on as it is.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            let live = LIVE.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
            PEAK.fetch_max(live, Ordering::Relaxed);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `alloc`/`realloc` above with this layout.
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller's contract for `realloc` is passed on as it is.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            if new_size >= layout.size() {
                let grown = new_size - layout.size();
                let live = LIVE.fetch_add(grown, Ordering::Relaxed) + grown;
                PEAK.fetch_max(live, Ordering::Relaxed);
            } else {
                LIVE.fetch_sub(layout.size() - new_size, Ordering::Relaxed);
            }
        }
        p
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

const MIB: usize = 1024 * 1024;

/// Calls `id.export` on `args` and returns its error and the peak of live bytes above what was
/// live before the call.
fn measure(id: &str, export: &str, args: &[Value]) -> (Result<Value, String>, usize) {
    let f = implementation(id, export).unwrap_or_else(|| panic!("{id}.{export}"));
    let before = LIVE.load(Ordering::Relaxed);
    PEAK.store(before, Ordering::Relaxed);
    let answer = f(args).map_err(nodetool_host_modules::HostError::into_message);
    let peak = PEAK.load(Ordering::Relaxed).saturating_sub(before);
    eprintln!(
        "{id}.{export}: peak {:.1} MiB above the call's start",
        peak as f64 / MIB as f64
    );
    (answer, peak)
}

fn zip_of(entries: &[(&str, Vec<u8>)]) -> Vec<u8> {
    let mut w = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let options = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated);
    for (name, data) in entries {
        w.start_file(*name, options)
            .unwrap_or_else(|e| panic!("{e}"));
        w.write_all(data).unwrap_or_else(|e| panic!("{e}"));
    }
    w.finish().unwrap_or_else(|e| panic!("{e}")).into_inner()
}

/// Every declared uncompressed size in a ZIP rewritten to 0, as a hostile archive would.
fn lie_about_sizes(mut archive: Vec<u8>) -> Vec<u8> {
    let mut i = 0;
    while i + 30 <= archive.len() {
        let at = match archive[i..i + 4] {
            [0x50, 0x4b, 0x03, 0x04] => Some(i + 22),
            [0x50, 0x4b, 0x01, 0x02] => Some(i + 24),
            _ => None,
        };
        if let Some(at) = at {
            archive[at..at + 4].copy_from_slice(&0u32.to_le_bytes());
        }
        i += 1;
    }
    archive
}

fn zlib(data: &[u8]) -> Vec<u8> {
    let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::best());
    z.write_all(data).unwrap_or_else(|e| panic!("{e}"));
    z.finish().unwrap_or_else(|e| panic!("{e}"))
}

fn err(answer: Result<Value, String>) -> String {
    answer.err().unwrap_or_else(|| "no error".into())
}

#[test]
fn hostile_documents_allocate_within_their_caps() {
    // A .docx whose document part is 400 MiB of spaces, its sizes declared as 0: only the
    // limited reader stands between it and the memory (budget 100 MiB).
    let spaces = vec![b' '; 400 * MIB];
    let docx = lie_about_sizes(zip_of(&[("word/document.xml", spaces)]));
    let (answer, peak) = measure("mammoth", "extractRawText", &[Value::Bytes(docx)]);
    assert_eq!(
        err(answer),
        "mammoth.extractRawText: the archive inflates past the 104857600 byte limit"
    );
    assert!(
        peak < 260 * MIB,
        "the docx bomb peaked at {} MiB",
        peak / MIB
    );

    // 300 PDF streams of 1 MiB of zeros each: refused by the pre-scan, which keeps nothing.
    let one = zlib(&vec![0u8; MIB]);
    let mut pdf = b"%PDF-1.5\n".to_vec();
    for i in 0..300 {
        pdf.extend_from_slice(
            format!(
                "{} 0 obj\n<< /Length {} /Filter /FlateDecode >>\nstream\n",
                i + 1,
                one.len()
            )
            .as_bytes(),
        );
        pdf.extend_from_slice(&one);
        pdf.extend_from_slice(b"\nendstream\nendobj\n");
    }
    let (answer, peak) = measure("pdf", "extractText", &[Value::Bytes(pdf)]);
    assert_eq!(
        err(answer),
        "pdf.extractText: the PDF's streams inflate past the 268435456 byte limit"
    );
    assert!(
        peak < 8 * MIB,
        "the stream bombs peaked at {} MiB",
        peak / MIB
    );

    // An EPUB listing one 8 MiB (whitespace) chapter 30 times: each read is charged, and none is
    // kept past its text.
    let chapter = format!("<html><body><p>x{}</p></body></html>", " ".repeat(8 * MIB));
    let spine: String = (0..30).map(|_| "<itemref idref=\"c\"/>").collect();
    let epub = zip_of(&[
        (
            "META-INF/container.xml",
            b"<container><rootfiles><rootfile full-path=\"b.opf\"/></rootfiles></container>".to_vec(),
        ),
        (
            "b.opf",
            format!("<package><manifest><item id=\"c\" href=\"c.xhtml\"/></manifest><spine>{spine}</spine></package>")
                .into_bytes(),
        ),
        ("c.xhtml", chapter.into_bytes()),
    ]);
    let (answer, peak) = measure("epub", "extractText", &[Value::Bytes(epub)]);
    assert_eq!(
        err(answer),
        "epub.extractText: the archive inflates past the 104857600 byte limit"
    );
    assert!(
        peak < 48 * MIB,
        "the repeated chapter peaked at {} MiB",
        peak / MIB
    );

    // A .pptx whose one slide part is listed 200 times.
    let ids: String = (0..200)
        .map(|i| format!("<p:sldId id=\"{}\" r:id=\"rId1\"/>", 256 + i))
        .collect();
    let pptx = zip_of(&[
        (
            "ppt/presentation.xml",
            format!("<p:presentation xmlns:p=\"p\" xmlns:r=\"r\"><p:sldIdLst>{ids}</p:sldIdLst></p:presentation>").into_bytes(),
        ),
        (
            "ppt/_rels/presentation.xml.rels",
            b"<Relationships><Relationship Id=\"rId1\" Type=\"x/slide\" Target=\"slides/slide1.xml\"/></Relationships>".to_vec(),
        ),
        (
            "ppt/slides/slide1.xml",
            format!("<p:sld xmlns:p=\"p\">{}</p:sld>", " ".repeat(4 * MIB)).into_bytes(),
        ),
    ]);
    let (answer, peak) = measure("pptx", "extractSlides", &[Value::Bytes(pptx)]);
    assert_eq!(
        err(answer),
        "pptx.extractSlides: the archive inflates past the 104857600 byte limit"
    );
    assert!(
        peak < 32 * MIB,
        "the repeated slide peaked at {} MiB",
        peak / MIB
    );

    // A PNG header claiming 60,000 x 60,000 pixels (14 GB of RGBA) for pdflib to embed.
    let mut png = Vec::new();
    image::RgbImage::from_pixel(1, 1, image::Rgb([0, 0, 0]))
        .write_to(&mut std::io::Cursor::new(&mut png), image::ImageFormat::Png)
        .unwrap_or_else(|e| panic!("{e}"));
    png[16..20].copy_from_slice(&60_000u32.to_be_bytes());
    png[20..24].copy_from_slice(&60_000u32.to_be_bytes());
    let item = Value::Object(vec![
        ("type".into(), Value::String("image".into())),
        ("data".into(), Value::Bytes(png)),
    ]);
    let page = Value::Object(vec![("items".into(), Value::Array(vec![item]))]);
    let spec = Value::Object(vec![("pages".into(), Value::Array(vec![page]))]);
    let (answer, peak) = measure("pdflib", "build", &[spec]);
    assert!(err(answer).starts_with(
        "pdflib.build: pages[0]: items[0]: data is not a PNG, JPEG, GIF, BMP or WebP image ("
    ),);
    assert!(peak < 8 * MIB, "the lying PNG peaked at {} MiB", peak / MIB);
}
