//! `pdf`: the text layer of a PDF, whole (`extractText`) or per page (`extractPages`), read with
//! lopdf.
//!
//! The reference ran pdf-parse (pdf.js) on the host. This module keeps its shapes (pages trimmed,
//! joined by a blank line; `{index, pageNumber, text}` per page) and lays text out the way a
//! reader sees it: a run of text that starts on another baseline starts a new line, and a gap
//! wider than a fraction of the font size between two runs on one line is a space (the advance
//! of every glyph is taken from the font's `/Widths`), as is a run drawn back to the left on its
//! line. Form XObjects are followed, so text a page draws through a form is read too. A simple
//! font with neither an encoding nor a ToUnicode map is read through the encoding built into its
//! embedded Type 1 program (TeX's math and symbol fonts, where the standard encoding turns every
//! period into a colon), and Latin ligatures come out as their letters, as pdf.js writes them.
//!
//! Hostile input, in the order it is met:
//! - every zlib stream that is not an image is inflated once, counting only, before lopdf sees
//!   the file, and the total is capped ([`MAX_PDF_INFLATED_BYTES`]): object streams are inflated
//!   while lopdf loads, and a thousand small bombs under any per-stream cap would otherwise sum
//!   to gigabytes;
//! - lopdf caps each stream's inflation ([`MAX_STREAM_BYTES`]) and nesting depth, and detects
//!   cycles in the page tree;
//! - page content (and forms) decoded for one call is counted against one budget
//!   ([`MAX_CONTENT_BYTES`]), so pages that share one stream cannot multiply its cost;
//! - forms nest at most [`MAX_FORM_DEPTH`] deep, and a form that draws itself is skipped;
//! - at most [`MAX_PDF_PAGES`] pages, and the text budget of every document call;
//! - a file encrypted with a user password is refused with what to do (one with an empty user
//!   password, the common "no copy" kind, opens as it does in any reader).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::panic::{AssertUnwindSafe, catch_unwind};

use flate2::{Decompress, FlushDecompress, Status};
use lopdf::content::Content;
use lopdf::{Dictionary, Document, Encoding, LoadOptions, Object, ObjectId, dictionary};
use nodetool_protocol::value::Value;

use super::{DEADLINE_STRIDE, DocError, TextBudget, check_deadline};
use crate::error::HostError;
use crate::limits::require_bytes;

/// Bytes every zlib stream of the file (images aside) may inflate to, together.
pub const MAX_PDF_INFLATED_BYTES: u64 = 256 * 1024 * 1024;
/// Bytes one stream may inflate to.
pub const MAX_STREAM_BYTES: usize = 64 * 1024 * 1024;
/// Bytes of page and form content one call decodes, every page together.
pub const MAX_CONTENT_BYTES: usize = 64 * 1024 * 1024;
/// Bytes of content one page (or one form) decodes at once. Decoded content becomes a list of
/// operations, up to some 40 bytes of memory per byte of content ("q\n" repeated), so this is
/// what bounds a page's peak memory: about 160 MiB at worst, a few MiB for real pages.
pub const MAX_PAGE_CONTENT_BYTES: usize = 4 * 1024 * 1024;
/// Pages one call reads.
pub const MAX_PDF_PAGES: usize = 10_000;
/// Form XObjects nested inside one another.
pub const MAX_FORM_DEPTH: usize = 12;
/// Graphics states saved with `q` at once (deeper saves are not tracked, only counted).
const MAX_SAVED_STATES: usize = 64;

/// `extractText(bytes)` -> every page's text, trimmed, joined by a blank line.
pub fn extract_text(args: &[Value]) -> Result<Value, HostError> {
    const AT: &str = "pdf.extractText";
    let pages = read(AT, args)?;
    let texts: Vec<&str> = pages.iter().map(|p| p.trim()).collect();
    Ok(Value::String(texts.join("\n\n")))
}

/// `extractPages(bytes)` -> `[{index, pageNumber, text}]` in page order, text trimmed.
pub fn extract_pages(args: &[Value]) -> Result<Value, HostError> {
    const AT: &str = "pdf.extractPages";
    let pages = read(AT, args)?;
    Ok(Value::Array(
        pages
            .iter()
            .enumerate()
            .map(|(i, text)| {
                Value::Object(vec![
                    ("index".into(), Value::Number(i as f64)),
                    ("pageNumber".into(), Value::Number((i + 1) as f64)),
                    ("text".into(), Value::String(text.trim().to_string())),
                ])
            })
            .collect(),
    ))
}

fn read(at: &str, args: &[Value]) -> Result<Vec<String>, HostError> {
    let bytes = require_bytes(at, args.first(), "bytes")?;
    // lopdf is fuzzed upstream but not proven: a file that trips it is malformed, not a failed
    // host.
    catch_unwind(AssertUnwindSafe(|| page_texts(bytes)))
        .unwrap_or_else(|_| {
            Err(DocError::Malformed(
                "the PDF is malformed and could not be read".into(),
            ))
        })
        .map_err(|e| e.at(at))
}

/// A PDF loaded under the hostile-input rules: the header, the inflation pre-scan, lopdf's
/// per-stream cap, and no password-encrypted file.
pub fn load(bytes: &[u8]) -> Result<Document, DocError> {
    let start = bytes.len().min(1024);
    if !bytes[..start].windows(5).any(|w| w == b"%PDF-") {
        return Err(DocError::NotDocument(
            "the bytes are not a PDF file (no %PDF- header)".into(),
        ));
    }
    prescan_inflation(bytes, MAX_PDF_INFLATED_BYTES)?;
    let options = LoadOptions {
        max_decompressed_size: Some(MAX_STREAM_BYTES),
        ..LoadOptions::default()
    };
    let doc = Document::load_mem_with_options(bytes, options).map_err(|e| match e {
        lopdf::Error::InvalidPassword | lopdf::Error::Decryption(_) => encrypted(),
        lopdf::Error::Decompress(_) => DocError::TooLarge(format!(
            "a stream of the PDF inflates past the {MAX_STREAM_BYTES} byte limit"
        )),
        e => DocError::Malformed(format!("the PDF could not be read ({e})")),
    })?;
    if doc.is_encrypted() {
        return Err(encrypted());
    }
    Ok(doc)
}

/// The text of every page, in order.
pub fn page_texts(bytes: &[u8]) -> Result<Vec<String>, DocError> {
    let doc = load(bytes)?;
    let pages = doc.get_pages();
    if pages.len() > MAX_PDF_PAGES {
        return Err(DocError::TooLarge(format!(
            "the PDF has {} pages, over the {MAX_PDF_PAGES} page limit",
            pages.len()
        )));
    }
    let mut reader = PageReader {
        doc: &doc,
        content_left: MAX_CONTENT_BYTES,
        text: TextBudget::standard(),
        fonts: Vec::new(),
        font_index: HashMap::new(),
    };
    pages
        .values()
        .map(|&page_id| reader.page(page_id))
        .collect()
}

fn encrypted() -> DocError {
    DocError::Encrypted(
        "the PDF is encrypted with a password; decrypt it first (for example `qpdf --decrypt`), NodeTool takes no passwords".into(),
    )
}

/// Inflates, counting only, every zlib stream of the file that is not an image, and refuses a
/// total past `cap`. Linear in the file: a scan resumes where the previous stream's data ended.
fn prescan_inflation(bytes: &[u8], cap: u64) -> Result<(), DocError> {
    let mut scratch = vec![0u8; 64 * 1024];
    let mut total: u64 = 0;
    let mut at = 0;
    while let Some(found) = find(&bytes[at..], b"stream") {
        let keyword = at + found;
        let mut data = keyword + 6;
        at = data;
        if keyword >= 3 && &bytes[keyword - 3..keyword] == b"end" {
            continue;
        }
        match bytes.get(data..data + 2) {
            Some([b'\r', b'\n']) => data += 2,
            Some([b'\n', _]) | Some([b'\r', _]) => data += 1,
            _ => continue,
        }
        if is_image_stream(&bytes[keyword.saturating_sub(4096)..keyword]) {
            continue;
        }
        let mut z = Decompress::new(true);
        loop {
            let input = &bytes[(data + z.total_in() as usize).min(bytes.len())..];
            let (before_in, before_out) = (z.total_in(), z.total_out());
            let status = z.decompress(input, &mut scratch, FlushDecompress::None);
            let produced = z.total_out() - before_out;
            total += produced;
            if total > cap {
                return Err(DocError::TooLarge(format!(
                    "the PDF's streams inflate past the {cap} byte limit"
                )));
            }
            match status {
                Ok(Status::StreamEnd) | Err(_) => break,
                _ if z.total_in() == before_in && produced == 0 => break,
                _ => {}
            }
        }
        at = at.max(data + z.total_in() as usize);
    }
    Ok(())
}

/// Whether the dictionary before a `stream` keyword (the last object header on) is an image's.
fn is_image_stream(before: &[u8]) -> bool {
    let dict = match rfind(before, b" obj") {
        Some(i) => &before[i..],
        None => before,
    };
    let has = |needle: &[u8]| find(dict, needle).is_some();
    (has(b"/Image") || has(b"/DCTDecode")) && !has(b"/ObjStm") && !has(b"/XRef")
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

fn rfind(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).rposition(|w| w == needle)
}

/// A 2-D affine matrix `[a b c d e f]`, row vector convention as in the PDF spec.
type Matrix = [f32; 6];
const IDENTITY: Matrix = [1.0, 0.0, 0.0, 1.0, 0.0, 0.0];

fn multiply(m: &Matrix, n: &Matrix) -> Matrix {
    [
        m[0] * n[0] + m[1] * n[2],
        m[0] * n[1] + m[1] * n[3],
        m[2] * n[0] + m[3] * n[2],
        m[2] * n[1] + m[3] * n[3],
        m[4] * n[0] + m[5] * n[2] + n[4],
        m[4] * n[1] + m[5] * n[3] + n[5],
    ]
}

fn matrix_of(operands: &[Object]) -> Option<Matrix> {
    let mut m = [0.0; 6];
    if operands.len() < 6 {
        return None;
    }
    for (slot, o) in m.iter_mut().zip(operands) {
        *slot = o.as_float().ok().filter(|v| v.is_finite())?;
    }
    Some(m)
}

fn number(operands: &[Object], i: usize) -> f32 {
    operands
        .get(i)
        .and_then(|o| o.as_float().ok())
        .filter(|v| v.is_finite())
        .unwrap_or(0.0)
}

/// What text extraction needs of a font: how to decode its codes and how far each advances.
struct Font<'a> {
    encoding: Option<Encoding<'a>>,
    /// For a simple font that names no encoding and has no ToUnicode map: the text of each
    /// code under the encoding built into its embedded Type 1 program (TeX's math and symbol
    /// fonts), where the standard encoding would give the wrong characters.
    builtin: Option<Vec<String>>,
    two_byte: bool,
    first_char: i64,
    widths: Vec<f32>,
    default_width: f32,
}

impl Font<'_> {
    fn width(&self, code: u32) -> f32 {
        usize::try_from(i64::from(code) - self.first_char)
            .ok()
            .and_then(|i| self.widths.get(i).copied())
            .filter(|w| *w > 0.0)
            .unwrap_or(self.default_width)
            / 1000.0
    }
}

struct PageReader<'a> {
    doc: &'a Document,
    content_left: usize,
    text: TextBudget,
    /// Every font read so far, once per font dictionary: a font's ToUnicode map is inflated and
    /// parsed once per call, however many pages and forms use it.
    fonts: Vec<Font<'a>>,
    font_index: HashMap<*const Dictionary, usize>,
}

/// The text state and the position of the last glyph drawn, in device space.
struct Layout {
    out: String,
    /// (baseline y, x where the last run ended, its font size in device space).
    last: Option<(f32, f32, f32)>,
}

struct State {
    ctm: Matrix,
    tm: Matrix,
    tlm: Matrix,
    font: Option<Vec<u8>>,
    size: f32,
    leading: f32,
    char_space: f32,
    word_space: f32,
    scale: f32,
    rise: f32,
}

impl<'a> PageReader<'a> {
    fn page(&mut self, page_id: ObjectId) -> Result<String, DocError> {
        check_deadline()?;
        let doc = self.doc;
        let (direct, ids) = doc.get_page_resources(page_id).map_err(|e| {
            DocError::Malformed(format!("a page's resources could not be read ({e})"))
        })?;
        let mut resources: Vec<&Dictionary> = direct.into_iter().collect();
        resources.extend(ids.iter().filter_map(|id| doc.get_dictionary(*id).ok()));
        let content = doc
            .get_page_content_with_limit(page_id, self.piece_limit())
            .map_err(|_| self.content_exceeded())?;
        self.content_left = self.content_left.saturating_sub(content.len());
        let mut layout = Layout {
            out: String::new(),
            last: None,
        };
        let mut state = State {
            ctm: IDENTITY,
            tm: IDENTITY,
            tlm: IDENTITY,
            font: None,
            size: 0.0,
            leading: 0.0,
            char_space: 0.0,
            word_space: 0.0,
            scale: 1.0,
            rise: 0.0,
        };
        let mut chain = HashSet::new();
        self.walk(&content, &resources, &mut state, &mut layout, &mut chain)?;
        // A space a layout engine drew at the end of a wrapped line is not text (pdf.js drops it
        // too).
        if !layout.out.contains([' ', '\t']) {
            return Ok(layout.out);
        }
        let lines: Vec<&str> = layout
            .out
            .split('\n')
            .map(|l| l.trim_end_matches([' ', '\t']))
            .collect();
        Ok(lines.join("\n"))
    }

    fn piece_limit(&self) -> usize {
        self.content_left.min(MAX_PAGE_CONTENT_BYTES)
    }

    fn content_exceeded(&self) -> DocError {
        if self.content_left <= MAX_PAGE_CONTENT_BYTES {
            DocError::TooLarge(format!(
                "the PDF's page content inflates past the {MAX_CONTENT_BYTES} byte limit"
            ))
        } else {
            DocError::TooLarge(format!(
                "a page's content inflates past the {MAX_PAGE_CONTENT_BYTES} byte limit of one page"
            ))
        }
    }

    fn fonts(&mut self, resources: &[&'a Dictionary]) -> BTreeMap<Vec<u8>, usize> {
        let doc = self.doc;
        let mut fonts = BTreeMap::new();
        for res in resources {
            let Some(dict) = deref_dict(doc, res.get(b"Font").ok()) else {
                continue;
            };
            for (name, value) in dict.iter() {
                if fonts.contains_key(name) {
                    continue;
                }
                let Some(font) = deref_dict(doc, Some(value)) else {
                    continue;
                };
                let key: *const Dictionary = font;
                let index = match self.font_index.get(&key) {
                    Some(&i) => i,
                    None => {
                        self.fonts.push(font_of(doc, font));
                        self.font_index.insert(key, self.fonts.len() - 1);
                        self.fonts.len() - 1
                    }
                };
                fonts.insert(name.clone(), index);
            }
        }
        fonts
    }

    fn walk(
        &mut self,
        content: &[u8],
        resources: &[&'a Dictionary],
        state: &mut State,
        layout: &mut Layout,
        chain: &mut HashSet<ObjectId>,
    ) -> Result<(), DocError> {
        let fonts = self.fonts(resources);
        // A content stream that does not decode has no text to give.
        let Ok(content) = Content::decode(content) else {
            return Ok(());
        };
        let mut saved: Vec<Matrix> = Vec::new();
        let mut unsaved_depth = 0usize;
        for (step, op) in content.operations.iter().enumerate() {
            if step % DEADLINE_STRIDE == DEADLINE_STRIDE - 1 {
                check_deadline()?;
            }
            let o = &op.operands;
            match op.operator.as_str() {
                "q" if saved.len() < MAX_SAVED_STATES => saved.push(state.ctm),
                "q" => unsaved_depth += 1,
                "Q" if unsaved_depth > 0 => unsaved_depth -= 1,
                "Q" => {
                    if let Some(ctm) = saved.pop() {
                        state.ctm = ctm;
                    }
                }
                "cm" => {
                    if let Some(m) = matrix_of(o) {
                        state.ctm = multiply(&m, &state.ctm);
                    }
                }
                "BT" => {
                    state.tm = IDENTITY;
                    state.tlm = IDENTITY;
                }
                "Tf" => {
                    state.font = o.first().and_then(|n| n.as_name().ok()).map(<[u8]>::to_vec);
                    state.size = number(o, 1);
                }
                "TL" => state.leading = number(o, 0),
                "Tc" => state.char_space = number(o, 0),
                "Tw" => state.word_space = number(o, 0),
                "Tz" => state.scale = number(o, 0) / 100.0,
                "Ts" => state.rise = number(o, 0),
                "Td" => next_line(state, number(o, 0), number(o, 1)),
                "TD" => {
                    state.leading = -number(o, 1);
                    next_line(state, number(o, 0), number(o, 1));
                }
                "Tm" => {
                    if let Some(m) = matrix_of(o) {
                        state.tm = m;
                        state.tlm = m;
                    }
                }
                "T*" => next_line(state, 0.0, -state.leading),
                "Tj" => {
                    if let Some(s) = o.first().and_then(|s| s.as_str().ok()) {
                        self.show(s, &fonts, state, layout)?;
                    }
                }
                "'" => {
                    next_line(state, 0.0, -state.leading);
                    if let Some(s) = o.first().and_then(|s| s.as_str().ok()) {
                        self.show(s, &fonts, state, layout)?;
                    }
                }
                "\"" => {
                    state.word_space = number(o, 0);
                    state.char_space = number(o, 1);
                    next_line(state, 0.0, -state.leading);
                    if let Some(s) = o.get(2).and_then(|s| s.as_str().ok()) {
                        self.show(s, &fonts, state, layout)?;
                    }
                }
                "TJ" => {
                    let Some(Ok(items)) = o.first().map(Object::as_array) else {
                        continue;
                    };
                    for item in items {
                        match item {
                            Object::String(s, _) => self.show(s, &fonts, state, layout)?,
                            other => {
                                if let Ok(n) = other.as_float()
                                    && n.is_finite()
                                {
                                    let tx = -n / 1000.0 * state.size * state.scale;
                                    state.tm = multiply(&[1.0, 0.0, 0.0, 1.0, tx, 0.0], &state.tm);
                                }
                            }
                        }
                    }
                }
                "Do" => {
                    let Some(name) = o.first().and_then(|n| n.as_name().ok()) else {
                        continue;
                    };
                    self.form(name, resources, state, layout, chain)?;
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// Draws the form XObject `name`, if it is one: its content, under its matrix, with its
    /// resources (or the caller's).
    fn form(
        &mut self,
        name: &[u8],
        resources: &[&'a Dictionary],
        state: &mut State,
        layout: &mut Layout,
        chain: &mut HashSet<ObjectId>,
    ) -> Result<(), DocError> {
        let doc = self.doc;
        let Some(id) = resources.iter().find_map(|res| {
            deref_dict(doc, res.get(b"XObject").ok())
                .and_then(|x| x.get(name).ok())
                .and_then(|o| o.as_reference().ok())
        }) else {
            return Ok(());
        };
        let Ok(stream) = doc.get_object(id).and_then(Object::as_stream) else {
            return Ok(());
        };
        if stream.dict.get(b"Subtype").and_then(Object::as_name).ok() != Some(b"Form") {
            return Ok(());
        }
        if chain.len() >= MAX_FORM_DEPTH || !chain.insert(id) {
            return Ok(());
        }
        let content = match stream.decompressed_content_with_limit(self.piece_limit()) {
            Ok(data) => data,
            Err(lopdf::Error::Decompress(_)) => return Err(self.content_exceeded()),
            Err(_) if stream.content.len() <= self.piece_limit() => stream.content.clone(),
            Err(_) => return Err(self.content_exceeded()),
        };
        self.content_left = self.content_left.saturating_sub(content.len());
        let own: Vec<&Dictionary> = deref_dict(doc, stream.dict.get(b"Resources").ok())
            .into_iter()
            .collect();
        let form_resources: Vec<&'a Dictionary> = if own.is_empty() {
            resources.to_vec()
        } else {
            own
        };
        let saved = (state.ctm, state.tm, state.tlm);
        if let Some(m) = stream
            .dict
            .get(b"Matrix")
            .ok()
            .and_then(|m| m.as_array().ok())
            .and_then(|m| matrix_of(m))
        {
            state.ctm = multiply(&m, &state.ctm);
        }
        let result = self.walk(&content, &form_resources, state, layout, chain);
        (state.ctm, state.tm, state.tlm) = saved;
        chain.remove(&id);
        result
    }

    /// Shows one string: places it on the layout (a new line, a space or neither), then moves
    /// the text matrix past its glyphs.
    fn show(
        &mut self,
        bytes: &[u8],
        fonts: &BTreeMap<Vec<u8>, usize>,
        state: &mut State,
        layout: &mut Layout,
    ) -> Result<(), DocError> {
        let Some(font) = state
            .font
            .as_ref()
            .and_then(|f| fonts.get(f))
            .and_then(|&i| self.fonts.get(i))
        else {
            return Ok(());
        };
        let render = multiply(
            &[
                state.size * state.scale,
                0.0,
                0.0,
                state.size,
                0.0,
                state.rise,
            ],
            &multiply(&state.tm, &state.ctm),
        );
        let (x, y) = (render[4], render[5]);
        let size = (render[2].hypot(render[3])).max(0.01);
        let decoded = match &font.builtin {
            Some(table) => bytes
                .iter()
                .map(|b| table[usize::from(*b)].as_str())
                .collect(),
            None => font
                .encoding
                .as_ref()
                .and_then(|e| Document::decode_text(e, bytes).ok())
                .unwrap_or_default(),
        };
        let mut advance = 0.0f32;
        let codes: Vec<u32> = if font.two_byte {
            bytes
                .chunks(2)
                .map(|c| u32::from(c[0]) << 8 | u32::from(c.get(1).copied().unwrap_or(0)))
                .collect()
        } else {
            bytes.iter().map(|b| u32::from(*b)).collect()
        };
        for code in codes {
            let mut tx = font.width(code) * state.size + state.char_space;
            if !font.two_byte && code == 32 {
                tx += state.word_space;
            }
            advance += tx * state.scale;
        }
        state.tm = multiply(&[1.0, 0.0, 0.0, 1.0, advance, 0.0], &state.tm);
        let end = multiply(&state.tm, &state.ctm);
        let end_x = end[4];
        if decoded.is_empty() {
            return Ok(());
        }
        let before = layout.out.len();
        if let Some((last_y, last_x, last_size)) = layout.last {
            let line_size = size.max(last_size);
            if (y - last_y).abs() > line_size * 0.5 {
                layout.out.push('\n');
            } else if (x - last_x > line_size * 0.15 || last_x - x > line_size)
                && !layout.out.ends_with(char::is_whitespace)
                && !decoded.starts_with(char::is_whitespace)
            {
                // A gap, or a run drawn back to the left of the last one on its line (a
                // right-aligned label written first): either way two words.
                layout.out.push(' ');
            }
        }
        push_unligated(&mut layout.out, &decoded);
        self.text.charge(layout.out.len() - before)?;
        layout.last = Some((y, end_x, size));
        Ok(())
    }
}

/// Appends `text` with the Latin ligatures a font draws as one glyph (U+FB00-FB06) written out
/// as their letters, as pdf.js does, so "ﬁle" reads and searches as "file".
fn push_unligated(out: &mut String, text: &str) {
    for c in text.chars() {
        match c {
            '\u{fb00}' => out.push_str("ff"),
            '\u{fb01}' => out.push_str("fi"),
            '\u{fb02}' => out.push_str("fl"),
            '\u{fb03}' => out.push_str("ffi"),
            '\u{fb04}' => out.push_str("ffl"),
            '\u{fb05}' | '\u{fb06}' => out.push_str("st"),
            c => out.push(c),
        }
    }
}

fn next_line(state: &mut State, tx: f32, ty: f32) {
    state.tlm = multiply(&[1.0, 0.0, 0.0, 1.0, tx, ty], &state.tlm);
    state.tm = state.tlm;
}

fn deref_dict<'a>(doc: &'a Document, object: Option<&'a Object>) -> Option<&'a Dictionary> {
    match object? {
        Object::Dictionary(d) => Some(d),
        Object::Reference(id) => doc.get_dictionary(*id).ok(),
        _ => None,
    }
}

fn font_of<'a>(doc: &'a Document, font: &'a Dictionary) -> Font<'a> {
    let encoding = font
        .get_font_encoding_with_limit(doc, MAX_STREAM_BYTES)
        .ok();
    let subtype = font.get(b"Subtype").and_then(Object::as_name).ok();
    let two_byte = subtype == Some(b"Type0");
    let first_char = font.get(b"FirstChar").and_then(Object::as_i64).unwrap_or(0);
    let widths = match font.get(b"Widths") {
        Ok(Object::Array(a)) => Some(a),
        Ok(Object::Reference(id)) => doc.get_object(*id).and_then(Object::as_array).ok(),
        _ => None,
    }
    .map(|a| a.iter().map(|w| w.as_float().unwrap_or(0.0)).collect())
    .unwrap_or_default();
    let default_width = if two_byte {
        font.get(b"DescendantFonts")
            .ok()
            .and_then(|d| match d {
                Object::Array(a) => a.first(),
                _ => None,
            })
            .and_then(|d| deref_dict(doc, Some(d)))
            .and_then(|d| d.get(b"DW").and_then(Object::as_float).ok())
            .unwrap_or(1000.0)
    } else {
        500.0
    };
    let builtin = (!two_byte && !font.has(b"Encoding") && !font.has(b"ToUnicode"))
        .then(|| builtin_encoding(doc, font))
        .flatten();
    Font {
        encoding,
        builtin,
        two_byte,
        first_char,
        widths,
        default_width,
    }
}

/// Bytes of an embedded Type 1 program's clear-text part read for its encoding.
const MAX_FONT_HEADER_BYTES: usize = 64 * 1024;

/// The built-in encoding of a simple font's embedded Type 1 program (`/FontFile`), as a table of
/// 256 texts, or `None` when it has none or uses the standard encoding. The program's clear-text
/// part lists `dup <code> /<glyph> put`; each glyph name becomes text through lopdf's glyph list,
/// by asking it to decode a copy of the font that names it in `/Differences`. A name lopdf does
/// not know leaves its code empty, as pdf.js leaves a glyph it cannot name.
fn builtin_encoding(doc: &Document, font: &Dictionary) -> Option<Vec<String>> {
    let descriptor = deref_dict(doc, font.get(b"FontDescriptor").ok())?;
    let id = descriptor
        .get(b"FontFile")
        .and_then(Object::as_reference)
        .ok()?;
    let stream = doc.get_object(id).and_then(Object::as_stream).ok()?;
    let program = stream
        .decompressed_content_with_limit(MAX_STREAM_BYTES)
        .ok()?;
    let clear = match find(&program, b"eexec") {
        Some(end) => &program[..end],
        None => &program[..program.len().min(MAX_FONT_HEADER_BYTES)],
    };
    let clear = &clear[..clear.len().min(MAX_FONT_HEADER_BYTES)];
    if find(clear, b"StandardEncoding def").is_some() {
        return None;
    }
    let text = String::from_utf8_lossy(clear);
    let tokens: Vec<&str> = text.split_ascii_whitespace().collect();
    let mut table = vec![String::new(); 256];
    let mut found = false;
    for window in tokens.windows(4) {
        let ["dup", code, name, "put"] = window else {
            continue;
        };
        let (Ok(code), Some(name)) = (code.parse::<u8>(), name.strip_prefix('/')) else {
            continue;
        };
        // One name at a time: lopdf refuses a whole /Differences array over one glyph name it
        // does not know, and an unknown glyph is only that code's loss.
        let mut named = font.clone();
        named.set(
            "Encoding",
            dictionary! {
                "Type" => "Encoding",
                "Differences" => vec![Object::Integer(i64::from(code)), Object::Name(name.as_bytes().to_vec())],
            },
        );
        if let Ok(encoding) = named.get_font_encoding_with_limit(doc, MAX_STREAM_BYTES)
            && let Ok(text) = Document::decode_text(&encoding, &[code])
        {
            table[usize::from(code)] = text;
            found = true;
        }
    }
    found.then_some(table)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::documents::tests::{bytes, mutants, text_of};
    use crate::error::HostErrorCode;
    use lopdf::Stream;
    use lopdf::content::Operation;

    /// A PDF with one page per entry; each page's lines drawn with `Td` line moves, in
    /// Helvetica with its real widths left out (the default width is used).
    pub(crate) fn pdf_of(pages: &[&[&str]]) -> Vec<u8> {
        let mut doc = Document::with_version("1.5");
        let pages_id = doc.new_object_id();
        let font_id = doc.add_object(dictionary! {
            "Type" => "Font", "Subtype" => "Type1", "BaseFont" => "Helvetica",
            "Encoding" => "WinAnsiEncoding",
        });
        let resources_id = doc.add_object(dictionary! {
            "Font" => dictionary! { "F1" => font_id },
        });
        let mut kids = vec![];
        for lines in pages {
            let mut ops = vec![
                Operation::new("BT", vec![]),
                Operation::new("Tf", vec!["F1".into(), 12.into()]),
                Operation::new("Td", vec![72.into(), 720.into()]),
            ];
            for (i, line) in lines.iter().enumerate() {
                if i > 0 {
                    ops.push(Operation::new("Td", vec![0.into(), (-16).into()]));
                }
                ops.push(Operation::new("Tj", vec![Object::string_literal(*line)]));
            }
            ops.push(Operation::new("ET", vec![]));
            let content = Content { operations: ops };
            let content_id = doc.add_object(Stream::new(
                dictionary! {},
                content.encode().unwrap_or_else(|e| panic!("{e}")),
            ));
            kids.push(Object::Reference(doc.add_object(dictionary! {
                "Type" => "Page", "Parent" => pages_id, "Contents" => content_id,
                "MediaBox" => vec![0.into(), 0.into(), 612.into(), 792.into()],
            })));
        }
        let count = kids.len() as i64;
        doc.objects.insert(
            pages_id,
            Object::Dictionary(dictionary! {
                "Type" => "Pages", "Kids" => kids, "Count" => count, "Resources" => resources_id,
            }),
        );
        let catalog_id = doc.add_object(dictionary! { "Type" => "Catalog", "Pages" => pages_id });
        doc.trailer.set("Root", catalog_id);
        doc.compress();
        let mut out = Vec::new();
        doc.save_to(&mut out).unwrap_or_else(|e| panic!("{e}"));
        out
    }

    #[test]
    fn text_whole_and_per_page() {
        // The trailing spaces a layout engine leaves on a wrapped line are not text.
        let pdf = pdf_of(&[
            &["Hello, world ", "second line  "],
            &["Page two (and parens)"],
        ]);
        assert_eq!(
            text_of(extract_text(&[bytes(pdf.clone())])),
            "Hello, world\nsecond line\n\nPage two (and parens)"
        );
        let pages = extract_pages(&[bytes(pdf)]);
        let Ok(Value::Array(pages)) = pages else {
            panic!("{pages:?}")
        };
        assert_eq!(pages.len(), 2);
        assert_eq!(
            pages[1],
            Value::Object(vec![
                ("index".into(), Value::Number(1.0)),
                ("pageNumber".into(), Value::Number(2.0)),
                ("text".into(), Value::String("Page two (and parens)".into())),
            ])
        );
    }

    #[test]
    fn not_a_pdf_and_bad_arguments() {
        let e = extract_text(&[bytes(b"hello".to_vec())])
            .err()
            .map(HostError::into_message)
            .unwrap_or_default();
        assert_eq!(
            e,
            "pdf.extractText: the bytes are not a PDF file (no %PDF- header)"
        );
        let e = extract_pages(&[Value::String("x".into())])
            .err()
            .map(HostError::into_message)
            .unwrap_or_default();
        assert!(
            e.starts_with("pdf.extractPages: bytes must be a Uint8Array"),
            "{e}"
        );
        let e = extract_text(&[bytes(b"%PDF-1.4\n garbage".to_vec())])
            .err()
            .map(HostError::into_message)
            .unwrap_or_default();
        assert!(
            e.starts_with("pdf.extractText: the PDF could not be read"),
            "{e}"
        );
    }

    /// A stream of `n` zero bytes, zlib-compressed.
    fn zeros(n: usize) -> Vec<u8> {
        use std::io::Write;
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::best());
        let chunk = vec![0u8; 1 << 20];
        let mut left = n;
        while left > 0 {
            let k = left.min(chunk.len());
            z.write_all(&chunk[..k]).unwrap_or_else(|e| panic!("{e}"));
            left -= k;
        }
        z.finish().unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn many_small_bombs_are_counted_together() {
        // 300 streams of 1 MiB of zeros each (about 1 KiB compressed): each is far under the
        // per-stream cap, together they pass the file's.
        let one = zeros(1 << 20);
        let mut file = b"%PDF-1.5\n".to_vec();
        for i in 0..300 {
            file.extend_from_slice(
                format!(
                    "{} 0 obj\n<< /Length {} /Filter /FlateDecode >>\nstream\n",
                    i + 1,
                    one.len()
                )
                .as_bytes(),
            );
            file.extend_from_slice(&one);
            file.extend_from_slice(b"\nendstream\nendobj\n");
        }
        assert_eq!(
            prescan_inflation(&file, 256 << 20).map_err(|e| e.code()),
            Err(HostErrorCode::LimitExceeded)
        );
        assert_eq!(prescan_inflation(&file, 300 << 20), Ok(()));
        let e = extract_text(&[bytes(file)])
            .err()
            .map(HostError::into_message)
            .unwrap_or_default();
        assert_eq!(
            e,
            "pdf.extractText: the PDF's streams inflate past the 268435456 byte limit"
        );
        // An image stream's data is never inflated by the reader, so it is not counted.
        let mut image = b"%PDF-1.5\n1 0 obj\n<< /Type /XObject /Subtype /Image /Filter /FlateDecode >>\nstream\n".to_vec();
        image.extend_from_slice(&zeros(300 << 20));
        assert_eq!(prescan_inflation(&image, 256 << 20), Ok(()));
    }

    #[test]
    fn a_page_content_bomb_is_stopped() {
        let mut doc =
            lopdf::Document::load_mem(&pdf_of(&[&["x"]])).unwrap_or_else(|e| panic!("{e}"));
        let page = *doc
            .get_pages()
            .values()
            .next()
            .unwrap_or_else(|| panic!("page"));
        let mut bomb = Stream::new(dictionary! { "Filter" => "FlateDecode" }, zeros(5 << 20));
        bomb.allows_compression = false;
        let bomb_id = doc.add_object(bomb);
        if let Ok(Object::Dictionary(d)) = doc.get_object_mut(page) {
            d.set("Contents", bomb_id);
        }
        let mut out = Vec::new();
        doc.save_to(&mut out).unwrap_or_else(|e| panic!("{e}"));
        let e = extract_text(&[bytes(out)])
            .err()
            .map(HostError::into_message)
            .unwrap_or_default();
        assert!(e.contains("byte limit of one page"), "{e}");
    }

    #[test]
    fn forms_are_read_and_a_form_drawing_itself_stops() {
        let mut doc = lopdf::Document::load_mem(&pdf_of(&[&["on the page"]]))
            .unwrap_or_else(|e| panic!("{e}"));
        let page = *doc
            .get_pages()
            .values()
            .next()
            .unwrap_or_else(|| panic!("page"));
        let font = doc
            .get_page_fonts(page)
            .ok()
            .and_then(|f| f.values().next().map(|d| (*d).clone()))
            .unwrap_or_else(|| panic!("font"));
        let font_id = doc.add_object(font);
        let form_id = doc.new_object_id();
        let content = b"BT /F1 12 Tf 72 500 Td (in a form) Tj ET /X Do".to_vec();
        let form = Stream::new(
            dictionary! {
                "Type" => "XObject", "Subtype" => "Form",
                "BBox" => vec![0.into(), 0.into(), 612.into(), 792.into()],
                "Resources" => dictionary! {
                    "Font" => dictionary! { "F1" => font_id },
                    "XObject" => dictionary! { "X" => form_id },
                },
            },
            content,
        );
        doc.objects.insert(form_id, Object::Stream(form));
        let page_content = b"BT /F1 12 Tf 72 720 Td (on the page) Tj ET /X Do".to_vec();
        let content_id = doc.add_object(Stream::new(dictionary! {}, page_content));
        if let Ok(Object::Dictionary(d)) = doc.get_object_mut(page) {
            d.set("Contents", content_id);
            d.set(
                "Resources",
                dictionary! {
                    "Font" => dictionary! { "F1" => font_id },
                    "XObject" => dictionary! { "X" => form_id },
                },
            );
        }
        let mut out = Vec::new();
        doc.save_to(&mut out).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            text_of(extract_text(&[bytes(out)])),
            "on the page\nin a form"
        );
    }

    #[test]
    fn an_encrypted_pdf_is_refused_with_what_to_do() {
        let mut doc =
            lopdf::Document::load_mem(&pdf_of(&[&["secret"]])).unwrap_or_else(|e| panic!("{e}"));
        let id = Object::String(
            b"0123456789abcdef".to_vec(),
            lopdf::StringFormat::Hexadecimal,
        );
        doc.trailer.set("ID", vec![id.clone(), id]);
        let state = lopdf::EncryptionState::try_from(lopdf::EncryptionVersion::V2 {
            document: &doc,
            owner_password: "owner",
            user_password: "user",
            key_length: 128,
            permissions: lopdf::Permissions::all(),
        })
        .unwrap_or_else(|e| panic!("{e}"));
        doc.encrypt(&state).unwrap_or_else(|e| panic!("{e}"));
        let mut out = Vec::new();
        doc.save_to(&mut out).unwrap_or_else(|e| panic!("{e}"));
        let e = extract_text(&[bytes(out)])
            .err()
            .map(HostError::into_message)
            .unwrap_or_default();
        assert!(
            e.starts_with(
                "pdf.extractText: the PDF is encrypted with a password; decrypt it first"
            ),
            "{e}"
        );
    }

    #[test]
    fn mutated_files_never_panic() {
        let real = pdf_of(&[&["Hello, world", "second line"], &["Page two"]]);
        for m in mutants(&real, 0x9e37_79b9, 300) {
            // Either answer is fine; a panic is caught by `read` and reported as malformed.
            let r = catch_unwind(AssertUnwindSafe(|| page_texts(&m)));
            assert!(r.is_ok(), "a mutated PDF panicked the reader");
        }
    }

    #[test]
    fn a_pdf_past_the_page_limit_is_refused_naming_it() {
        let blank: &[&str] = &[];
        let over = pdf_of(&vec![blank; MAX_PDF_PAGES + 1]);
        match page_texts(&over) {
            Err(DocError::TooLarge(message)) => assert_eq!(
                message,
                format!(
                    "the PDF has {} pages, over the {MAX_PDF_PAGES} page limit",
                    MAX_PDF_PAGES + 1
                )
            ),
            other => panic!("{:?}", other.map(|p| p.len())),
        }
        // Through the export, the guest sees the module's error, not a dead host.
        let error = extract_text(&[bytes(over)]).map(|_| ()).err();
        assert!(
            error.is_some_and(|e| e.to_string().contains("page limit")),
            "a PDF past the page limit must be refused"
        );
    }

    #[test]
    fn cycles_and_deep_nesting_are_errors_not_hangs_or_overflows() {
        // A page tree whose Pages node lists itself among its kids, beside a real page.
        let mut doc =
            lopdf::Document::load_mem(&pdf_of(&[&["only page"]])).unwrap_or_else(|e| panic!("{e}"));
        let root_pages = doc
            .catalog()
            .and_then(|c| c.get(b"Pages"))
            .and_then(Object::as_reference)
            .unwrap_or_else(|e| panic!("{e}"));
        if let Ok(Object::Dictionary(pages)) = doc.get_object_mut(root_pages)
            && let Ok(Object::Array(kids)) = pages.get_mut(b"Kids")
        {
            kids.push(Object::Reference(root_pages));
        }
        let mut cyclic = Vec::new();
        doc.save_to(&mut cyclic).unwrap_or_else(|e| panic!("{e}"));
        // lopdf's page iterator stops re-entering the cycle after a few rounds: a bounded
        // answer, each visit the one real page.
        let pages = page_texts(&cyclic).unwrap_or_else(|e| panic!("{e:?}"));
        assert!((1..=16).contains(&pages.len()), "{} pages", pages.len());
        assert!(pages.iter().all(|p| p.trim() == "only page"), "{pages:?}");

        // An object nested 200,000 arrays deep: lopdf's depth limit, not the stack, stops it.
        let mut deep = b"%PDF-1.4\n1 0 obj\n".to_vec();
        deep.extend(std::iter::repeat_n(b'[', 200_000));
        deep.extend(std::iter::repeat_n(b']', 200_000));
        deep.extend_from_slice(b"\nendobj\ntrailer\n<< /Root 1 0 R >>\n%%EOF\n");
        // (Lenient loading drops the object, so the file has no pages: no text, and no crash.)
        let answer = page_texts(&deep);
        assert!(
            matches!(&answer, Ok(p) if p.is_empty()) || answer.is_err(),
            "{answer:?}"
        );

        // Page content nested 200,000 arrays deep (the content parser has the same limit).
        let mut doc =
            lopdf::Document::load_mem(&pdf_of(&[&["x"]])).unwrap_or_else(|e| panic!("{e}"));
        let page = *doc
            .get_pages()
            .values()
            .next()
            .unwrap_or_else(|| panic!("page"));
        let mut content = b"BT /F1 12 Tf ".to_vec();
        content.extend(std::iter::repeat_n(b'[', 200_000));
        content.extend(std::iter::repeat_n(b']', 200_000));
        content.extend_from_slice(b" TJ ET");
        let content_id = doc.add_object(Stream::new(dictionary! {}, content));
        if let Ok(Object::Dictionary(d)) = doc.get_object_mut(page) {
            d.set("Contents", content_id);
        }
        let mut out = Vec::new();
        doc.save_to(&mut out).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(page_texts(&out), Ok(vec![String::new()]));

        // A form that draws a form that draws the first: the chain stops, the page's text stays.
        let forms = b"BT /F1 12 Tf 72 720 Td (loop) Tj ET /A Do".to_vec();
        let mut doc =
            lopdf::Document::load_mem(&pdf_of(&[&["x"]])).unwrap_or_else(|e| panic!("{e}"));
        let page = *doc
            .get_pages()
            .values()
            .next()
            .unwrap_or_else(|| panic!("page"));
        let (a, b) = (doc.new_object_id(), doc.new_object_id());
        for (id, other) in [(a, b), (b, a)] {
            let form = Stream::new(
                dictionary! {
                    "Type" => "XObject", "Subtype" => "Form",
                    "Resources" => dictionary! { "XObject" => dictionary! { "A" => other } },
                },
                b"/A Do".to_vec(),
            );
            doc.objects.insert(id, Object::Stream(form));
        }
        let content_id = doc.add_object(Stream::new(dictionary! {}, forms));
        if let Ok(Object::Dictionary(d)) = doc.get_object_mut(page) {
            d.set("Contents", content_id);
            let mut resources = d
                .get(b"Resources")
                .ok()
                .and_then(|r| r.as_dict().ok().cloned())
                .unwrap_or_default();
            resources.set("XObject", dictionary! { "A" => a });
            d.set("Resources", resources);
        }
        let mut out = Vec::new();
        doc.save_to(&mut out).unwrap_or_else(|e| panic!("{e}"));
        let _ = page_texts(&out).unwrap_or_else(|e| panic!("{e:?}"));
    }

    #[test]
    fn a_type1_programs_own_encoding_ligatures_and_runs_drawn_leftwards() {
        let mut doc = lopdf::Document::with_version("1.5");
        let pages_id = doc.new_object_id();
        // A math font as TeX embeds it: no /Encoding, no /ToUnicode, and a program whose
        // encoding puts the period at 58 (where the standard encoding has a colon) and a
        // ligature at 12.
        let program = b"%!PS-AdobeFont-1.0: CMMI10\n/Encoding 256 array\n0 1 255 {1 index exch /.notdef put} for\ndup 58 /period put\ndup 12 /fi put\ndup 65 /A put\nreadonly def\ncurrentdict end\ncurrentfile eexec\n\x8f\x9f binary".to_vec();
        let file = doc.add_object(Stream::new(dictionary! { "Length1" => 200 }, program));
        let descriptor = doc.add_object(
            dictionary! { "Type" => "FontDescriptor", "FontName" => "CMMI10", "FontFile" => file },
        );
        let font = doc.add_object(dictionary! {
            "Type" => "Font", "Subtype" => "Type1", "BaseFont" => "CMMI10", "FontDescriptor" => descriptor,
        });
        let helvetica = doc.add_object(dictionary! {
            "Type" => "Font", "Subtype" => "Type1", "BaseFont" => "Helvetica", "Encoding" => "WinAnsiEncoding",
        });
        // "A:" in the math font reads "A." ; then a label drawn at the right, then text to its
        // left on the same baseline.
        let content = b"BT /M 12 Tf 72 700 Td <413A0C> Tj ET BT /H 12 Tf 400 650 Td ([Function]) Tj ET BT /H 12 Tf 72 650 Td (int) Tj ET".to_vec();
        let content_id = doc.add_object(Stream::new(dictionary! {}, content));
        let page = doc.add_object(dictionary! {
            "Type" => "Page", "Parent" => pages_id, "Contents" => content_id,
            "MediaBox" => vec![0.into(), 0.into(), 612.into(), 792.into()],
            "Resources" => dictionary! { "Font" => dictionary! { "M" => font, "H" => helvetica } },
        });
        doc.objects.insert(
            pages_id,
            Object::Dictionary(
                dictionary! { "Type" => "Pages", "Kids" => vec![page.into()], "Count" => 1 },
            ),
        );
        let catalog = doc.add_object(dictionary! { "Type" => "Catalog", "Pages" => pages_id });
        doc.trailer.set("Root", catalog);
        let mut out = Vec::new();
        doc.save_to(&mut out).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            page_texts(&out),
            Ok(vec!["A.fi\n[Function] int".to_string()])
        );
    }
}
