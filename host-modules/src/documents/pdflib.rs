//! `pdflib`: build a PDF from a plain page list (`build`) and concatenate PDFs (`merge`), with
//! lopdf.
//!
//! The reference ran pdf-lib on the host. The description and messages are its: `build({pages:
//! [{width = 612, height = 792, items}]})`, 1 to [`MAX_PAGES`] pages of at most 8192 points a
//! side, items placed in points from the page's top-left: `text` (`text`, `x`, `y`, `size` 12,
//! `color` hex) in Helvetica, and `image` (`data`, `x`, `y`, `width`, `height`, PNG or JPEG).
//! `merge(pdfs)` concatenates 1 to [`MAX_PAGES`] documents' pages in order. Beyond it:
//! - text may choose one of the standard fonts (`font: "Times-Roman"`, `"Courier-Bold"`, ...,
//!   or `bold`/`italic` on Helvetica), and a newline starts a new line (`lineHeight`, 1.2 x
//!   size); characters outside the fonts' WinAnsi set become `?`, where pdf-lib throws;
//! - shapes: `rect` (`x`, `y`, `width`, `height`, `fill`, `stroke`, `lineWidth`), `ellipse`
//!   (the same box) and `line` (`x1`, `y1`, `x2`, `y2`, `color`, `lineWidth`);
//! - GIF, BMP and WebP images too (decoded and embedded as pixels); a JPEG is embedded as it is;
//! - `merge` reads every input under the `pdf` module's hostile-input rules (inflation pre-scan,
//!   stream caps, password-encrypted files refused), keeps each page's inherited media box,
//!   resources and rotation, and refuses more than [`MAX_MERGE_INPUT_BYTES`] of input in all.
//!
//! Output is deterministic (no dates, a fixed producer) and within the result cap.

use std::collections::BTreeMap;
use std::io::Cursor;
use std::panic::{AssertUnwindSafe, catch_unwind};

use lopdf::content::{Content, Operation};
use lopdf::{Dictionary, Document, Object, ObjectId, Stream, StringFormat, dictionary};
use nodetool_protocol::value::Value;

use super::ooxml::{member, number_of, string_or_empty, truthy};
use super::pdf;
use super::{DocError, check_deadline};
use crate::error::{HostError, HostErrorCode};
use crate::limits::{MAX_RESULT_BYTES, options_of, require_bytes};

/// Pages one `build` may make, and documents one `merge` may take (the reference's limit).
pub const MAX_PAGES: usize = 200;
/// The largest page side, in points (the reference's limit).
pub const MAX_PAGE_SIDE: f64 = 8192.0;
/// Items one `build` may draw, every page together.
pub const MAX_ITEMS: usize = 50_000;
/// Bytes of images one `build` may embed.
pub const MAX_IMAGE_BYTES: usize = 50 * 1024 * 1024;
/// Pixels one embedded image may have once decoded (a PNG's header can claim any size).
pub const MAX_IMAGE_PIXELS: u64 = 40_000_000;
/// Bytes of input one `merge` may take, every document together.
pub const MAX_MERGE_INPUT_BYTES: usize = 50 * 1024 * 1024;
/// Pages one `merge` may produce.
pub const MAX_MERGED_PAGES: usize = 10_000;

const BUILD: &str = "pdflib.build";
const MERGE: &str = "pdflib.merge";

/// The standard fonts text may use (Symbol and ZapfDingbats have no WinAnsi text).
const FONTS: [&str; 12] = [
    "Helvetica",
    "Helvetica-Bold",
    "Helvetica-Oblique",
    "Helvetica-BoldOblique",
    "Times-Roman",
    "Times-Bold",
    "Times-Italic",
    "Times-BoldItalic",
    "Courier",
    "Courier-Bold",
    "Courier-Oblique",
    "Courier-BoldOblique",
];

/// `build(spec)` -> the PDF as bytes.
pub fn build(args: &[Value]) -> Result<Value, HostError> {
    let spec = options_of(args.first());
    let pages: &[Value] = match member(spec, "pages") {
        Some(Value::Array(p)) => p,
        _ => &[],
    };
    if pages.is_empty() {
        return Err(HostError::invalid(format!(
            "{BUILD}: provide at least one page"
        )));
    }
    if pages.len() > MAX_PAGES {
        return Err(HostError::limit(format!(
            "{BUILD}: at most {MAX_PAGES} pages"
        )));
    }
    let mut builder = Builder::new();
    for (i, raw) in pages.iter().enumerate() {
        let Value::Object(page) = raw else {
            return Err(HostError::invalid(format!(
                "{BUILD}: pages[{i}] must be an object"
            )));
        };
        check_deadline().map_err(|e| e.at(BUILD))?;
        builder.page(i, page)?;
    }
    builder.finish().map(Value::Bytes).map_err(|e| e.at(BUILD))
}

fn side(at: &str, value: Option<&Value>, default: f64, label: &str) -> Result<f64, HostError> {
    let n = match value {
        None | Some(Value::Undefined | Value::Null) => default,
        Some(v) => crate::limits::js_to_number(v),
    };
    if !n.is_finite() || n <= 0.0 || n > MAX_PAGE_SIDE {
        return Err(HostError::invalid(format!(
            "{at}: {label} must be a positive number up to {MAX_PAGE_SIDE}"
        )));
    }
    Ok(n)
}

/// `#rgb` / `#rrggbb` to 0-1 components; anything else is black (as the reference).
fn rgb(value: Option<&Value>) -> [f32; 3] {
    let raw = string_or_empty(value);
    let hex = raw.trim().trim_start_matches('#');
    let hex: String = if hex.len() == 3 {
        hex.chars().flat_map(|c| [c, c]).collect()
    } else {
        hex.to_string()
    };
    if hex.len() != 6 || !hex.chars().all(|c| c.is_ascii_hexdigit()) {
        return [0.0, 0.0, 0.0];
    }
    let part =
        |i: usize| u8::from_str_radix(&hex[i..i + 2], 16).map_or(0.0, |v| f32::from(v) / 255.0);
    [part(0), part(2), part(4)]
}

/// WinAnsi (the standard fonts' encoding here) for `text`; other characters become `?`.
fn win_ansi(text: &str) -> Vec<u8> {
    const HIGH: [(char, u8); 27] = [
        ('€', 0x80),
        ('‚', 0x82),
        ('ƒ', 0x83),
        ('„', 0x84),
        ('…', 0x85),
        ('†', 0x86),
        ('‡', 0x87),
        ('ˆ', 0x88),
        ('‰', 0x89),
        ('Š', 0x8a),
        ('‹', 0x8b),
        ('Œ', 0x8c),
        ('Ž', 0x8e),
        ('‘', 0x91),
        ('’', 0x92),
        ('“', 0x93),
        ('”', 0x94),
        ('•', 0x95),
        ('–', 0x96),
        ('—', 0x97),
        ('˜', 0x98),
        ('™', 0x99),
        ('š', 0x9a),
        ('›', 0x9b),
        ('œ', 0x9c),
        ('ž', 0x9e),
        ('Ÿ', 0x9f),
    ];
    text.chars()
        .map(|c| match c as u32 {
            0x20..=0x7e | 0xa0..=0xff => c as u8,
            0x09 => b' ',
            _ => HIGH.iter().find(|(h, _)| *h == c).map_or(b'?', |(_, b)| *b),
        })
        .collect()
}

fn n(v: f64) -> Object {
    Object::Real(v as f32)
}

struct Builder {
    doc: Document,
    pages_id: ObjectId,
    kids: Vec<Object>,
    fonts: BTreeMap<&'static str, ObjectId>,
    items: usize,
    image_bytes: usize,
}

impl Builder {
    fn new() -> Builder {
        let mut doc = Document::with_version("1.7");
        let pages_id = doc.new_object_id();
        Builder {
            doc,
            pages_id,
            kids: Vec::new(),
            fonts: BTreeMap::new(),
            items: 0,
            image_bytes: 0,
        }
    }

    fn font(&mut self, name: &'static str) -> ObjectId {
        if let Some(id) = self.fonts.get(name) {
            return *id;
        }
        let id = self.doc.add_object(dictionary! {
            "Type" => "Font", "Subtype" => "Type1", "BaseFont" => name, "Encoding" => "WinAnsiEncoding",
        });
        self.fonts.insert(name, id);
        id
    }

    fn page(&mut self, i: usize, page: &[(String, Value)]) -> Result<(), HostError> {
        let at = format!("{BUILD}: pages[{i}]");
        let width = side(&at, member(page, "width"), 612.0, "width")?;
        let height = side(&at, member(page, "height"), 792.0, "height")?;
        let items: &[Value] = match member(page, "items") {
            Some(Value::Array(items)) => items,
            _ => &[],
        };
        let mut ops: Vec<Operation> = Vec::new();
        let mut fonts = Dictionary::new();
        let mut images = Dictionary::new();
        for (j, raw) in items.iter().enumerate() {
            self.items += 1;
            if self.items > MAX_ITEMS {
                return Err(HostError::limit(format!(
                    "{BUILD}: more than {MAX_ITEMS} items"
                )));
            }
            let Value::Object(item) = raw else {
                return Err(HostError::invalid(format!(
                    "{at}: items[{j}] must be an object"
                )));
            };
            let num = |key: &str, default: f64| number_of(member(item, key)).unwrap_or(default);
            let kind = string_or_empty(member(item, "type"));
            match kind.as_str() {
                "text" => {
                    let size = num("size", 12.0).clamp(0.1, 1000.0);
                    let font = self.text_font(item);
                    let key = format!(
                        "F{}",
                        FONTS.iter().position(|f| *f == font).unwrap_or(0) + 1
                    );
                    fonts.set(key.as_bytes().to_vec(), self.font(font));
                    let line_height = num("lineHeight", size * 1.2);
                    let [r, g, b] = rgb(member(item, "color"));
                    let (x, y) = (num("x", 0.0), num("y", 0.0));
                    ops.push(Operation::new("BT", vec![]));
                    ops.push(Operation::new(
                        "Tf",
                        vec![Object::Name(key.into_bytes()), n(size)],
                    ));
                    ops.push(Operation::new(
                        "rg",
                        vec![n(r.into()), n(g.into()), n(b.into())],
                    ));
                    ops.push(Operation::new("TL", vec![n(line_height)]));
                    ops.push(Operation::new("Td", vec![n(x), n(height - y - size)]));
                    for (k, line) in string_or_empty(member(item, "text"))
                        .split('\n')
                        .enumerate()
                    {
                        if k > 0 {
                            ops.push(Operation::new("T*", vec![]));
                        }
                        ops.push(Operation::new(
                            "Tj",
                            vec![Object::String(
                                win_ansi(line.trim_end_matches('\r')),
                                StringFormat::Literal,
                            )],
                        ));
                    }
                    ops.push(Operation::new("ET", vec![]));
                }
                "image" => {
                    let where_ = format!("{at}: items[{j}]");
                    let data = require_bytes(&where_, member(item, "data"), "data")?;
                    self.image_bytes += data.len();
                    if self.image_bytes > MAX_IMAGE_BYTES {
                        return Err(HostError::limit(format!(
                            "{where_} brings the images past the {MAX_IMAGE_BYTES} byte limit"
                        )));
                    }
                    let (id, pw, ph) = self
                        .embed_image(data)
                        .map_err(|(code, e)| HostError::new(code, format!("{where_}: {e}")))?;
                    let w = num("width", f64::from(pw));
                    let h = num("height", f64::from(ph));
                    let key = format!("Im{}", images.len() + 1);
                    images.set(key.as_bytes().to_vec(), id);
                    let (x, y) = (num("x", 0.0), num("y", 0.0));
                    ops.push(Operation::new("q", vec![]));
                    ops.push(Operation::new(
                        "cm",
                        vec![n(w), n(0.0), n(0.0), n(h), n(x), n(height - y - h)],
                    ));
                    ops.push(Operation::new("Do", vec![Object::Name(key.into_bytes())]));
                    ops.push(Operation::new("Q", vec![]));
                }
                "rect" | "ellipse" => {
                    let (x, y) = (num("x", 0.0), num("y", 0.0));
                    let (w, h) = (num("width", 100.0), num("height", 100.0));
                    let fill = member(item, "fill").map(|v| rgb(Some(v)));
                    let stroke = member(item, "stroke").map(|v| rgb(Some(v)));
                    ops.push(Operation::new("q", vec![]));
                    ops.push(Operation::new("w", vec![n(num("lineWidth", 1.0))]));
                    if let Some([r, g, b]) = fill {
                        ops.push(Operation::new(
                            "rg",
                            vec![n(r.into()), n(g.into()), n(b.into())],
                        ));
                    }
                    if let Some([r, g, b]) = stroke {
                        ops.push(Operation::new(
                            "RG",
                            vec![n(r.into()), n(g.into()), n(b.into())],
                        ));
                    }
                    let bottom = height - y - h;
                    if kind == "rect" {
                        ops.push(Operation::new("re", vec![n(x), n(bottom), n(w), n(h)]));
                    } else {
                        ellipse(&mut ops, x + w / 2.0, bottom + h / 2.0, w / 2.0, h / 2.0);
                    }
                    let paint = match (fill.is_some(), stroke.is_some()) {
                        (true, true) => "B",
                        (false, true) => "S",
                        _ => "f",
                    };
                    ops.push(Operation::new(paint, vec![]));
                    ops.push(Operation::new("Q", vec![]));
                }
                "line" => {
                    let [r, g, b] = rgb(member(item, "color"));
                    ops.push(Operation::new("q", vec![]));
                    ops.push(Operation::new("w", vec![n(num("lineWidth", 1.0))]));
                    ops.push(Operation::new(
                        "RG",
                        vec![n(r.into()), n(g.into()), n(b.into())],
                    ));
                    ops.push(Operation::new(
                        "m",
                        vec![n(num("x1", 0.0)), n(height - num("y1", 0.0))],
                    ));
                    ops.push(Operation::new(
                        "l",
                        vec![n(num("x2", 0.0)), n(height - num("y2", 0.0))],
                    ));
                    ops.push(Operation::new("S", vec![]));
                    ops.push(Operation::new("Q", vec![]));
                }
                other => {
                    return Err(HostError::invalid(format!(
                        "{at}: items[{j}] has unknown type \"{other}\""
                    )));
                }
            }
        }
        let content = Content { operations: ops }.encode().map_err(|e| {
            HostError::new(
                HostErrorCode::Internal,
                format!("{at}: the page could not be written ({e})"),
            )
        })?;
        let mut stream = Stream::new(Dictionary::new(), content);
        // Compressed content keeps a text-heavy page small; a failure leaves it plain.
        let _ = stream.compress();
        let content_id = self.doc.add_object(stream);
        let mut resources = Dictionary::new();
        if !fonts.is_empty() {
            resources.set("Font", fonts);
        }
        if !images.is_empty() {
            resources.set("XObject", images);
        }
        let page_id = self.doc.add_object(dictionary! {
            "Type" => "Page",
            "Parent" => self.pages_id,
            "MediaBox" => vec![0.into(), 0.into(), n(width), n(height)],
            "Contents" => content_id,
            "Resources" => resources,
        });
        self.kids.push(page_id.into());
        Ok(())
    }

    fn text_font(&self, item: &[(String, Value)]) -> &'static str {
        if let Some(Value::String(name)) = member(item, "font")
            && let Some(f) = FONTS.iter().find(|f| f.eq_ignore_ascii_case(name))
        {
            return f;
        }
        match (truthy(member(item, "bold")), truthy(member(item, "italic"))) {
            (true, true) => "Helvetica-BoldOblique",
            (true, false) => "Helvetica-Bold",
            (false, true) => "Helvetica-Oblique",
            (false, false) => "Helvetica",
        }
    }

    /// Embeds an image: a JPEG as it is, anything else decoded to 8-bit RGB (and its alpha as a
    /// soft mask), within the pixel cap. An error is its code and its reason.
    fn embed_image(
        &mut self,
        data: &[u8],
    ) -> Result<(ObjectId, u32, u32), (HostErrorCode, String)> {
        if let Some((w, h, components)) = jpeg_header(data) {
            let space = match components {
                1 => "DeviceGray",
                4 => "DeviceCMYK",
                _ => "DeviceRGB",
            };
            let mut dict = dictionary! {
                "Type" => "XObject", "Subtype" => "Image", "Width" => i64::from(w), "Height" => i64::from(h),
                "ColorSpace" => space, "BitsPerComponent" => 8, "Filter" => "DCTDecode",
            };
            if components == 4 {
                // Adobe's CMYK JPEGs store inverted values.
                dict.set(
                    "Decode",
                    vec![
                        1.into(),
                        0.into(),
                        1.into(),
                        0.into(),
                        1.into(),
                        0.into(),
                        1.into(),
                        0.into(),
                    ],
                );
            }
            let stream = Stream::new(dict, data.to_vec()).with_compression(false);
            return Ok((self.doc.add_object(stream), w, h));
        }
        let mut reader = image::ImageReader::new(Cursor::new(data))
            .with_guessed_format()
            .map_err(|e| {
                (
                    HostErrorCode::MalformedInput,
                    format!("data could not be read as an image ({e})"),
                )
            })?;
        let mut limits = image::Limits::default();
        limits.max_image_width = Some(20_000);
        limits.max_image_height = Some(20_000);
        limits.max_alloc = Some(MAX_IMAGE_PIXELS * 4);
        reader.limits(limits);
        let (w, h) = reader.into_dimensions().map_err(|e| {
            (
                image_error_code(&e),
                format!("data is not a PNG, JPEG, GIF, BMP or WebP image ({e})"),
            )
        })?;
        if u64::from(w) * u64::from(h) > MAX_IMAGE_PIXELS {
            return Err((
                HostErrorCode::LimitExceeded,
                format!("the image has {w}x{h} pixels, over the {MAX_IMAGE_PIXELS} pixel limit"),
            ));
        }
        let mut reader = image::ImageReader::new(Cursor::new(data))
            .with_guessed_format()
            .map_err(|e| {
                (
                    HostErrorCode::MalformedInput,
                    format!("data could not be read as an image ({e})"),
                )
            })?;
        let mut limits = image::Limits::default();
        limits.max_alloc = Some(MAX_IMAGE_PIXELS * 4);
        reader.limits(limits);
        let decoded = reader.decode().map_err(|e| {
            (
                image_error_code(&e),
                format!("data is not a PNG, JPEG, GIF, BMP or WebP image ({e})"),
            )
        })?;
        let rgba = decoded.to_rgba8();
        let mut pixels = Vec::with_capacity(rgba.len() / 4 * 3);
        let mut alpha = Vec::with_capacity(rgba.len() / 4);
        for p in rgba.pixels() {
            pixels.extend_from_slice(&p.0[..3]);
            alpha.push(p.0[3]);
        }
        let mut dict = dictionary! {
            "Type" => "XObject", "Subtype" => "Image", "Width" => i64::from(w), "Height" => i64::from(h),
            "ColorSpace" => "DeviceRGB", "BitsPerComponent" => 8,
        };
        if alpha.iter().any(|a| *a != 255) {
            let mut mask = Stream::new(
                dictionary! {
                    "Type" => "XObject", "Subtype" => "Image", "Width" => i64::from(w), "Height" => i64::from(h),
                    "ColorSpace" => "DeviceGray", "BitsPerComponent" => 8,
                },
                alpha,
            );
            let _ = mask.compress();
            dict.set("SMask", self.doc.add_object(mask));
        }
        let mut stream = Stream::new(dict, pixels);
        let _ = stream.compress();
        Ok((self.doc.add_object(stream), w, h))
    }

    fn finish(mut self) -> Result<Vec<u8>, DocError> {
        let count = self.kids.len() as i64;
        self.doc.objects.insert(
            self.pages_id,
            Object::Dictionary(
                dictionary! { "Type" => "Pages", "Kids" => self.kids, "Count" => count },
            ),
        );
        finish_document(self.doc, self.pages_id)
    }
}

/// Adds the catalog and the producer, and writes the file within the result cap.
fn finish_document(mut doc: Document, pages_id: ObjectId) -> Result<Vec<u8>, DocError> {
    let catalog = doc.add_object(dictionary! { "Type" => "Catalog", "Pages" => pages_id });
    doc.trailer.set("Root", catalog);
    let info = doc.add_object(dictionary! { "Producer" => Object::string_literal("NodeTool") });
    doc.trailer.set("Info", info);
    let mut out = Vec::new();
    doc.save_to(&mut out)
        .map_err(|e| DocError::Internal(format!("the PDF could not be written ({e})")))?;
    if out.len() > MAX_RESULT_BYTES {
        return Err(DocError::OutputTooLarge(format!(
            "the PDF would be larger than the {MAX_RESULT_BYTES} bytes one call may return"
        )));
    }
    Ok(out)
}

/// Four Bézier arcs around `(cx, cy)`.
fn ellipse(ops: &mut Vec<Operation>, cx: f64, cy: f64, rx: f64, ry: f64) {
    const K: f64 = 0.552_284_75;
    let (kx, ky) = (rx * K, ry * K);
    ops.push(Operation::new("m", vec![n(cx + rx), n(cy)]));
    let arcs = [
        [cx + rx, cy + ky, cx + kx, cy + ry, cx, cy + ry],
        [cx - kx, cy + ry, cx - rx, cy + ky, cx - rx, cy],
        [cx - rx, cy - ky, cx - kx, cy - ry, cx, cy - ry],
        [cx + kx, cy - ry, cx + rx, cy - ky, cx + rx, cy],
    ];
    for a in arcs {
        ops.push(Operation::new("c", a.iter().map(|v| n(*v)).collect()));
    }
    ops.push(Operation::new("h", vec![]));
}

/// A baseline or progressive JPEG's width, height and components, from its frame header.
fn jpeg_header(data: &[u8]) -> Option<(u32, u32, u8)> {
    if !data.starts_with(&[0xff, 0xd8]) {
        return None;
    }
    let mut i = 2;
    while i + 4 <= data.len() {
        if data[i] != 0xff {
            return None;
        }
        let marker = data[i + 1];
        if marker == 0xff {
            i += 1;
            continue;
        }
        let len = usize::from(u16::from_be_bytes([data[i + 2], data[i + 3]]));
        if matches!(marker, 0xc0..=0xc3 | 0xc5..=0xc7 | 0xc9..=0xcb | 0xcd..=0xcf) {
            let frame = data.get(i + 4..i + 2 + len)?;
            let h = u32::from(u16::from_be_bytes([*frame.get(1)?, *frame.get(2)?]));
            let w = u32::from(u16::from_be_bytes([*frame.get(3)?, *frame.get(4)?]));
            let components = *frame.get(5)?;
            return (w > 0 && h > 0 && matches!(components, 1 | 3 | 4))
                .then_some((w, h, components));
        }
        if len < 2 {
            return None;
        }
        i += 2 + len;
    }
    None
}

/// `merge(pdfs)` -> one PDF with every input's pages, in order.
pub fn merge(args: &[Value]) -> Result<Value, HostError> {
    let pdfs = match args.first() {
        Some(Value::Array(items)) if !items.is_empty() => items,
        _ => {
            return Err(HostError::invalid(format!(
                "{MERGE}: provide a non-empty array of PDF byte arrays"
            )));
        }
    };
    if pdfs.len() > MAX_PAGES {
        return Err(HostError::limit(format!(
            "{MERGE}: at most {MAX_PAGES} documents"
        )));
    }
    let mut inputs = Vec::with_capacity(pdfs.len());
    let mut total = 0usize;
    for (i, value) in pdfs.iter().enumerate() {
        let bytes = require_bytes(&format!("{MERGE}: pdfs[{i}]"), Some(value), "pdf")?;
        total += bytes.len();
        if total > MAX_MERGE_INPUT_BYTES {
            return Err(HostError::limit(format!(
                "{MERGE}: the documents come to more than the {MAX_MERGE_INPUT_BYTES} bytes one merge may take"
            )));
        }
        inputs.push(bytes);
    }
    catch_unwind(AssertUnwindSafe(|| merge_documents(&inputs)))
        .unwrap_or_else(|_| {
            Err((
                None,
                DocError::Malformed("a PDF is malformed and could not be read".into()),
            ))
        })
        .map(Value::Bytes)
        .map_err(|(i, e)| match i {
            Some(i) => e.at(&format!("{MERGE}: pdfs[{i}]")),
            None => e.at(MERGE),
        })
}

/// The code of an image the `image` crate could not read: a format or variant it does not
/// implement, one past its limits, or bytes broken past reading.
fn image_error_code(e: &image::ImageError) -> HostErrorCode {
    match e {
        image::ImageError::Unsupported(_) => HostErrorCode::Unsupported,
        image::ImageError::Limits(_) => HostErrorCode::LimitExceeded,
        _ => HostErrorCode::MalformedInput,
    }
}

/// Page attributes a page may inherit from the page tree.
const INHERITED: [&[u8]; 4] = [b"Resources", b"MediaBox", b"CropBox", b"Rotate"];

fn merge_documents(inputs: &[&[u8]]) -> Result<Vec<u8>, (Option<usize>, DocError)> {
    let mut out = Document::with_version("1.7");
    let pages_id = out.new_object_id();
    let mut kids = Vec::new();
    for (i, bytes) in inputs.iter().enumerate() {
        check_deadline().map_err(|e| (None, e))?;
        let mut doc = pdf::load(bytes).map_err(|e| (Some(i), e))?;
        doc.renumber_objects_with(out.max_id + 1);
        let page_ids: Vec<ObjectId> = doc.get_pages().values().copied().collect();
        if kids.len() + page_ids.len() > MAX_MERGED_PAGES {
            return Err((
                None,
                DocError::TooLarge(format!(
                    "the merged PDF would have more than {MAX_MERGED_PAGES} pages"
                )),
            ));
        }
        // Each page takes its inherited attributes along before its old tree is dropped.
        let mut pages = Vec::with_capacity(page_ids.len());
        for id in &page_ids {
            let Ok(mut page) = doc.get_dictionary(*id).cloned() else {
                continue;
            };
            let mut parent = page.get(b"Parent").and_then(Object::as_reference).ok();
            let mut hops = 0;
            while let Some(pid) = parent {
                hops += 1;
                let Ok(node) = doc.get_dictionary(pid) else {
                    break;
                };
                if hops > 64 {
                    break;
                }
                for key in INHERITED {
                    if !page.has(key)
                        && let Ok(v) = node.get(key)
                    {
                        page.set(key.to_vec(), v.clone());
                    }
                }
                parent = node.get(b"Parent").and_then(Object::as_reference).ok();
            }
            page.set("Parent", pages_id);
            pages.push((*id, page));
        }
        for (id, object) in std::mem::take(&mut doc.objects) {
            let kind = match &object {
                Object::Dictionary(d) => d.get(b"Type").and_then(Object::as_name).ok(),
                _ => None,
            };
            if matches!(kind, Some(b"Catalog" | b"Pages" | b"Outlines")) {
                continue;
            }
            out.objects.insert(id, object);
        }
        for (id, page) in pages {
            out.objects.insert(id, Object::Dictionary(page));
            kids.push(Object::Reference(id));
        }
        out.max_id = out.max_id.max(doc.max_id);
    }
    let count = kids.len() as i64;
    out.objects.insert(
        pages_id,
        Object::Dictionary(dictionary! { "Type" => "Pages", "Kids" => kids, "Count" => count }),
    );
    finish_document(out, pages_id).map_err(|e| (None, e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::documents::pdf::{extract_pages, extract_text};
    use crate::documents::tests::{bytes, mutants, obj, png, s, text_of};

    fn num(v: f64) -> Value {
        Value::Number(v)
    }

    fn jpeg() -> Vec<u8> {
        let mut out = Vec::new();
        image::RgbImage::from_pixel(8, 4, image::Rgb([200, 100, 0]))
            .write_to(&mut Cursor::new(&mut out), image::ImageFormat::Jpeg)
            .unwrap_or_else(|e| panic!("{e}"));
        out
    }

    pub(crate) fn sample() -> Vec<u8> {
        let spec = obj(&[(
            "pages",
            Value::Array(vec![
                obj(&[(
                    "items",
                    Value::Array(vec![
                        obj(&[
                            ("type", s("text")),
                            ("text", s("Invoice (No. 42)")),
                            ("x", num(72.0)),
                            ("y", num(72.0)),
                            ("size", num(20.0)),
                            ("bold", Value::Bool(true)),
                        ]),
                        obj(&[
                            ("type", s("text")),
                            ("text", s("Total: 1.234,50 €\nThank you")),
                            ("x", num(72.0)),
                            ("y", num(120.0)),
                            ("color", s("#336699")),
                        ]),
                        obj(&[
                            ("type", s("rect")),
                            ("x", num(72.0)),
                            ("y", num(200.0)),
                            ("width", num(200.0)),
                            ("height", num(20.0)),
                            ("fill", s("#eee")),
                            ("stroke", s("000")),
                        ]),
                        obj(&[
                            ("type", s("ellipse")),
                            ("x", num(300.0)),
                            ("y", num(200.0)),
                            ("width", num(40.0)),
                            ("height", num(20.0)),
                        ]),
                        obj(&[
                            ("type", s("line")),
                            ("x1", num(72.0)),
                            ("y1", num(250.0)),
                            ("x2", num(540.0)),
                            ("y2", num(250.0)),
                        ]),
                        obj(&[
                            ("type", s("image")),
                            ("data", Value::Bytes(png(4, 2, 128))),
                            ("x", num(72.0)),
                            ("y", num(300.0)),
                            ("width", num(40.0)),
                            ("height", num(20.0)),
                        ]),
                        obj(&[
                            ("type", s("image")),
                            ("data", Value::Bytes(jpeg())),
                            ("x", num(200.0)),
                            ("y", num(300.0)),
                        ]),
                    ]),
                )]),
                obj(&[
                    ("width", num(300.0)),
                    ("height", num(200.0)),
                    (
                        "items",
                        Value::Array(vec![obj(&[
                            ("type", s("text")),
                            ("text", s("Small page")),
                            ("x", num(10.0)),
                            ("y", num(10.0)),
                            ("font", s("times-roman")),
                        ])]),
                    ),
                ]),
            ]),
        )]);
        match build(&[spec]) {
            Ok(Value::Bytes(b)) => b,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn build_then_extract_text() {
        let pdf = sample();
        assert!(pdf.starts_with(b"%PDF-1.7"));
        assert_eq!(sample(), pdf, "equal descriptions give equal bytes");
        assert_eq!(
            text_of(extract_text(&[bytes(pdf.clone())])),
            "Invoice (No. 42)\nTotal: 1.234,50 €\nThank you\n\nSmall page"
        );
        let doc = lopdf::Document::load_mem(&pdf).unwrap_or_else(|e| panic!("{e}"));
        let pages: Vec<ObjectId> = doc.get_pages().values().copied().collect();
        let media = doc
            .get_dictionary(pages[1])
            .and_then(|p| p.get(b"MediaBox"))
            .and_then(Object::as_array)
            .map(|a| {
                a.iter()
                    .map(|v| v.as_float().unwrap_or(-1.0))
                    .collect::<Vec<_>>()
            });
        assert_eq!(media.ok(), Some(vec![0.0, 0.0, 300.0, 200.0]));
    }

    #[test]
    fn merge_concatenates_pages_in_order() {
        let one = sample();
        let merged = match merge(&[Value::Array(vec![bytes(one.clone()), bytes(one.clone())])]) {
            Ok(Value::Bytes(b)) => b,
            other => panic!("{other:?}"),
        };
        let Ok(Value::Array(pages)) = extract_pages(&[bytes(merged.clone())]) else {
            panic!("pages")
        };
        let texts: Vec<Value> = pages
            .iter()
            .filter_map(|p| match p {
                Value::Object(m) => m.iter().find(|(k, _)| k == "text").map(|(_, v)| v.clone()),
                _ => None,
            })
            .collect();
        assert_eq!(
            texts,
            [
                s("Invoice (No. 42)\nTotal: 1.234,50 €\nThank you"),
                s("Small page"),
                s("Invoice (No. 42)\nTotal: 1.234,50 €\nThank you"),
                s("Small page")
            ]
        );
        // Attributes a page inherited from its old tree come along: a page whose media box and
        // resources sit on its parent keeps them.
        let mut inherited = lopdf::Document::load_mem(&one).unwrap_or_else(|e| panic!("{e}"));
        let first = *inherited
            .get_pages()
            .values()
            .next()
            .unwrap_or_else(|| panic!("page"));
        let parent = inherited
            .get_dictionary(first)
            .and_then(|p| p.get(b"Parent"))
            .and_then(Object::as_reference)
            .unwrap_or_else(|e| panic!("{e}"));
        let (media, resources) = {
            let page = inherited
                .get_dictionary(first)
                .unwrap_or_else(|e| panic!("{e}"));
            (
                page.get(b"MediaBox").cloned().unwrap_or(Object::Null),
                page.get(b"Resources").cloned().unwrap_or(Object::Null),
            )
        };
        if let Ok(Object::Dictionary(page)) = inherited.get_object_mut(first) {
            page.remove(b"MediaBox");
            page.remove(b"Resources");
        }
        if let Ok(Object::Dictionary(node)) = inherited.get_object_mut(parent) {
            node.set("MediaBox", media.clone());
            node.set("Resources", resources);
        }
        let mut moved = Vec::new();
        inherited
            .save_to(&mut moved)
            .unwrap_or_else(|e| panic!("{e}"));
        let merged = match merge(&[Value::Array(vec![bytes(moved)])]) {
            Ok(Value::Bytes(b)) => b,
            other => panic!("{other:?}"),
        };
        let doc = lopdf::Document::load_mem(&merged).unwrap_or_else(|e| panic!("{e}"));
        let first = *doc
            .get_pages()
            .values()
            .next()
            .unwrap_or_else(|| panic!("page"));
        assert_eq!(
            doc.get_dictionary(first)
                .ok()
                .and_then(|p| p.get(b"MediaBox").ok()),
            Some(&media)
        );
        assert!(text_of(extract_text(&[bytes(merged)])).starts_with("Invoice (No. 42)"));
    }

    #[test]
    fn argument_errors_match_the_reference() {
        let e = |spec: Value| {
            build(&[spec])
                .err()
                .map(HostError::into_message)
                .unwrap_or_default()
        };
        assert_eq!(e(obj(&[])), "pdflib.build: provide at least one page");
        assert_eq!(
            e(obj(&[("pages", Value::Array(vec![obj(&[]); 201]))])),
            "pdflib.build: at most 200 pages"
        );
        assert_eq!(
            e(obj(&[("pages", Value::Array(vec![num(1.0)]))])),
            "pdflib.build: pages[0] must be an object"
        );
        assert_eq!(
            e(obj(&[(
                "pages",
                Value::Array(vec![obj(&[("width", num(9000.0))])])
            )])),
            "pdflib.build: pages[0]: width must be a positive number up to 8192"
        );
        assert_eq!(
            e(obj(&[(
                "pages",
                Value::Array(vec![obj(&[("height", s("tall"))])])
            )])),
            "pdflib.build: pages[0]: height must be a positive number up to 8192"
        );
        assert_eq!(
            e(obj(&[(
                "pages",
                Value::Array(vec![obj(&[(
                    "items",
                    Value::Array(vec![obj(&[("type", s("video"))])])
                )])])
            )])),
            "pdflib.build: pages[0]: items[0] has unknown type \"video\""
        );
        assert!(
            e(obj(&[(
                "pages",
                Value::Array(vec![obj(&[(
                    "items",
                    Value::Array(vec![obj(&[("type", s("image")), ("data", s("x"))])])
                )])])
            )]))
            .starts_with("pdflib.build: pages[0]: items[0]: data must be a Uint8Array")
        );
        let m = |v: Value| {
            merge(&[v])
                .err()
                .map(HostError::into_message)
                .unwrap_or_default()
        };
        assert_eq!(
            m(Value::Array(vec![])),
            "pdflib.merge: provide a non-empty array of PDF byte arrays"
        );
        assert_eq!(
            m(s("x")),
            "pdflib.merge: provide a non-empty array of PDF byte arrays"
        );
        assert_eq!(
            m(Value::Array(vec![bytes(vec![0]); 201])),
            "pdflib.merge: at most 200 documents"
        );
        assert_eq!(
            m(Value::Array(vec![
                bytes(sample()),
                bytes(b"not a pdf".to_vec())
            ])),
            "pdflib.merge: pdfs[1]: the bytes are not a PDF file (no %PDF- header)"
        );
        assert_eq!(
            m(Value::Array(vec![bytes(vec![b'%'; 9 << 20]); 6])),
            "pdflib.merge: the documents come to more than the 52428800 bytes one merge may take"
        );
    }

    #[test]
    fn hostile_images_are_refused_before_decoding() {
        // A PNG header claiming 100,000 x 100,000 pixels (40 GB decoded), with no data behind it.
        let mut liar = png(1, 1, 255);
        liar[16..20].copy_from_slice(&100_000u32.to_be_bytes());
        liar[20..24].copy_from_slice(&100_000u32.to_be_bytes());
        let spec = obj(&[(
            "pages",
            Value::Array(vec![obj(&[(
                "items",
                Value::Array(vec![obj(&[
                    ("type", s("image")),
                    ("data", Value::Bytes(liar)),
                ])]),
            )])]),
        )]);
        let e = build(&[spec])
            .err()
            .map(HostError::into_message)
            .unwrap_or_default();
        assert!(e.starts_with("pdflib.build: pages[0]: items[0]: data is not a PNG, JPEG, GIF, BMP or WebP image ("), "{e}");
        // Text that cannot be encoded is replaced, never refused.
        assert_eq!(win_ansi("a€漢\u{1f600}"), vec![b'a', 0x80, b'?', b'?']);
        assert_eq!(jpeg_header(&[0xff, 0xd8, 0xff, 0xc0, 0, 0]), None);
        assert_eq!(jpeg_header(&jpeg()), Some((8, 4, 3)));
    }

    #[test]
    fn mutated_inputs_never_panic_merge() {
        let real = sample();
        for m in mutants(&real, 0x5eed_1234, 100) {
            let r = catch_unwind(AssertUnwindSafe(|| merge_documents(&[&m])));
            assert!(r.is_ok(), "a mutated PDF panicked merge");
        }
    }
}
