//! `docx`: build a Word document from a plain description, written as WordprocessingML parts
//! into a deflated package.
//!
//! The reference ran the `docx` npm library on the host. The description and messages are its:
//! `{properties: {title, author, subject, keywords}, elements: [...]}` with elements of type
//! `heading` (`text`, `level` 1-6), `paragraph` (`text`, `alignment` LEFT/CENTER/RIGHT/JUSTIFY,
//! `bold`, `italic`, `fontSize` in points), `table` (`rows` of cells), `image` (`data` bytes,
//! `width`/`height` in inches) and `pageBreak`. Beyond it:
//! - a paragraph or heading may give `runs: [{text, bold, italic, underline, fontSize, link}]`
//!   instead of `text` (a run with `link` is a hyperlink);
//! - `{type: "list", items, ordered}` makes a bulleted or numbered list (an item is a string or
//!   `{text, level}` with level 0-8); each numbered list counts from 1;
//! - a table may mark its first row `header: true` (bold, repeated on every page);
//! - an image without a size keeps its own aspect ratio, at most 6 inches wide, where the
//!   reference made every image 200x200 pixels;
//! - a newline in text is a line break, a tab a tab.
//!
//! Output is deterministic (no timestamps), and bounded: [`MAX_ELEMENTS`] elements,
//! [`MAX_TABLE_CELLS`] table cells, [`MAX_IMAGE_BYTES`] of images, and the package within the
//! result cap.

use nodetool_protocol::value::Value;

use super::ooxml::{
    Package, check_written, image_kind, image_pixels, member, number_of, string_or_empty, truthy,
    xml_text,
};
use super::{DEADLINE_STRIDE, DocError, check_deadline};
use crate::error::{HostError, HostErrorCode};
use crate::limits::{options_of, require_bytes};

/// Elements one document may have.
pub const MAX_ELEMENTS: usize = 100_000;
/// Table cells one document may have, every table together.
pub const MAX_TABLE_CELLS: usize = 250_000;
/// Bytes of images one document may embed.
pub const MAX_IMAGE_BYTES: usize = 50 * 1024 * 1024;

const AT: &str = "docx.build";
const EMU_PER_INCH: f64 = 914_400.0;

/// `build(spec)` -> the .docx as bytes.
pub fn build(args: &[Value]) -> Result<Value, HostError> {
    build_document(args.first()).map(Value::Bytes)
}

fn build_document(spec: Option<&Value>) -> Result<Vec<u8>, HostError> {
    let spec = options_of(spec);
    let elements: &[Value] = match member(spec, "elements") {
        Some(Value::Array(items)) => items,
        _ => &[],
    };
    if elements.len() > MAX_ELEMENTS {
        return Err(HostError::limit(format!(
            "{AT}: {} elements exceeds the {MAX_ELEMENTS} element limit",
            elements.len()
        )));
    }
    let mut doc = Writer::default();
    for (index, raw) in elements.iter().enumerate() {
        if index % DEADLINE_STRIDE == DEADLINE_STRIDE - 1 {
            check_deadline().map_err(|e| e.at(AT))?;
        }
        doc.element(index, raw)?;
        check_written(doc.body.len()).map_err(|e| e.at(AT))?;
    }
    doc.package(options_of(member(spec, "properties")))
        .map_err(|e| e.at(AT))
}

#[derive(Default)]
struct Writer {
    body: String,
    /// (relationship id, part name, bytes) of every image.
    images: Vec<(String, String, Vec<u8>)>,
    image_bytes: usize,
    /// (relationship id, URL) of every hyperlink.
    links: Vec<(String, String)>,
    /// Numbered lists made so far (each gets its own `w:num`, so each counts from 1).
    numbered_lists: usize,
    cells: usize,
    drawings: usize,
}

fn element_error(index: usize, reason: &str) -> HostError {
    HostError::invalid(format!("{AT}: elements[{index}] {reason}"))
}

/// An element error under another code than [`HostErrorCode::InvalidArgument`].
fn element_error_as(code: HostErrorCode, index: usize, reason: &str) -> HostError {
    HostError::new(code, format!("{AT}: elements[{index}] {reason}"))
}

impl Writer {
    fn element(&mut self, index: usize, raw: &Value) -> Result<(), HostError> {
        let Value::Object(item) = raw else {
            return Err(element_error(index, "is missing a \"type\""));
        };
        let kind = match member(item, "type") {
            Some(Value::String(s)) => s.as_str(),
            _ => return Err(element_error(index, "is missing a \"type\"")),
        };
        match kind {
            "heading" => {
                let level = number_of(member(item, "level")).unwrap_or(1.0);
                let level = if level.is_nan() {
                    1
                } else {
                    level.clamp(1.0, 6.0) as u8
                };
                let props = format!("<w:pPr><w:pStyle w:val=\"Heading{level}\"/></w:pPr>");
                let runs = self.runs(index, item, &RunStyle::default())?;
                self.body.push_str(&format!("<w:p>{props}{runs}</w:p>"));
            }
            "paragraph" => {
                let alignment = match member(item, "alignment") {
                    None => "left",
                    Some(Value::String(s)) => match s.as_str() {
                        "LEFT" => "left",
                        "CENTER" => "center",
                        "RIGHT" => "right",
                        "JUSTIFY" => "both",
                        other => {
                            return Err(element_error(
                                index,
                                &format!(
                                    "has unknown alignment {other:?} (LEFT, CENTER, RIGHT or JUSTIFY)"
                                ),
                            ));
                        }
                    },
                    Some(_) => {
                        return Err(element_error(index, "alignment must be a string"));
                    }
                };
                let style = RunStyle {
                    bold: truthy(member(item, "bold")),
                    italic: truthy(member(item, "italic")),
                    underline: false,
                    half_points: half_points(member(item, "fontSize"), 12.0),
                };
                let runs = self.runs(index, item, &style)?;
                self.body.push_str(&format!(
                    "<w:p><w:pPr><w:jc w:val=\"{alignment}\"/></w:pPr>{runs}</w:p>"
                ));
            }
            "list" => self.list(index, item)?,
            "table" => self.table(index, item)?,
            "image" => self.image(index, item)?,
            "pageBreak" => self
                .body
                .push_str("<w:p><w:r><w:br w:type=\"page\"/></w:r></w:p>"),
            other => {
                return Err(element_error(
                    index,
                    &format!("has unknown type \"{other}\""),
                ));
            }
        }
        Ok(())
    }

    /// The runs of a paragraph-like element: its `runs`, else its `text` in `style`.
    fn runs(
        &mut self,
        index: usize,
        item: &[(String, Value)],
        style: &RunStyle,
    ) -> Result<String, HostError> {
        let Some(Value::Array(runs)) = member(item, "runs") else {
            return Ok(run_xml(&string_or_empty(member(item, "text")), style));
        };
        let mut out = String::new();
        for (i, run) in runs.iter().enumerate() {
            let run = match run {
                Value::Object(m) => m,
                Value::String(s) => {
                    out.push_str(&run_xml(s, style));
                    continue;
                }
                _ => {
                    return Err(element_error(
                        index,
                        &format!("runs[{i}] must be a string or an object"),
                    ));
                }
            };
            let own = RunStyle {
                bold: member(run, "bold").map_or(style.bold, |v| truthy(Some(v))),
                italic: member(run, "italic").map_or(style.italic, |v| truthy(Some(v))),
                underline: truthy(member(run, "underline")),
                half_points: member(run, "fontSize")
                    .map_or(style.half_points, |v| half_points(Some(v), 12.0)),
            };
            let text = string_or_empty(member(run, "text"));
            match member(run, "link") {
                Some(Value::String(url)) if !url.is_empty() => {
                    let id = format!("rIdLink{}", self.links.len() + 1);
                    self.links.push((id.clone(), url.clone()));
                    let linked = RunStyle {
                        underline: true,
                        ..own
                    };
                    let inner = run_xml(&text, &linked).replacen(
                        "<w:rPr>",
                        "<w:rPr><w:rStyle w:val=\"Hyperlink\"/>",
                        1,
                    );
                    out.push_str(&format!("<w:hyperlink r:id=\"{id}\">{inner}</w:hyperlink>"));
                }
                _ => out.push_str(&run_xml(&text, &own)),
            }
        }
        Ok(out)
    }

    fn list(&mut self, index: usize, item: &[(String, Value)]) -> Result<(), HostError> {
        let Some(Value::Array(items)) = member(item, "items") else {
            return Err(element_error(index, "items must be an array"));
        };
        let num_id = if truthy(member(item, "ordered")) {
            self.numbered_lists += 1;
            self.numbered_lists + 1
        } else {
            1
        };
        for entry in items {
            let (text, level) = match entry {
                Value::Object(m) => (
                    string_or_empty(member(m, "text")),
                    number_of(member(m, "level")).unwrap_or(0.0).clamp(0.0, 8.0) as u8,
                ),
                other => (string_or_empty(Some(other)), 0),
            };
            self.body.push_str(&format!(
                "<w:p><w:pPr><w:pStyle w:val=\"ListParagraph\"/><w:numPr><w:ilvl w:val=\"{level}\"/><w:numId w:val=\"{num_id}\"/></w:numPr></w:pPr>{}</w:p>",
                run_xml(&text, &RunStyle::default())
            ));
        }
        Ok(())
    }

    fn table(&mut self, index: usize, item: &[(String, Value)]) -> Result<(), HostError> {
        let rows: &[Value] = match member(item, "rows") {
            Some(Value::Array(rows)) => rows,
            _ => &[],
        };
        let header = truthy(member(item, "header"));
        let columns = rows
            .iter()
            .map(|r| match r {
                Value::Array(cells) => cells.len(),
                _ => 0,
            })
            .max()
            .unwrap_or(0)
            .max(1);
        self.body.push_str(
            "<w:tbl><w:tblPr><w:tblStyle w:val=\"TableGrid\"/><w:tblW w:w=\"0\" w:type=\"auto\"/></w:tblPr><w:tblGrid>",
        );
        for _ in 0..columns {
            self.body.push_str("<w:gridCol/>");
        }
        self.body.push_str("</w:tblGrid>");
        for (r, row) in rows.iter().enumerate() {
            let cells: &[Value] = match row {
                Value::Array(cells) => cells,
                _ => &[],
            };
            self.cells += cells.len();
            if self.cells > MAX_TABLE_CELLS {
                return Err(element_error_as(
                    HostErrorCode::LimitExceeded,
                    index,
                    &format!("brings the document past the {MAX_TABLE_CELLS} table cell limit"),
                ));
            }
            let is_header = header && r == 0;
            self.body.push_str(if is_header {
                "<w:tr><w:trPr><w:tblHeader/></w:trPr>"
            } else {
                "<w:tr>"
            });
            let style = RunStyle {
                bold: is_header,
                ..RunStyle::default()
            };
            for cell in cells {
                self.body.push_str(&format!(
                    "<w:tc><w:tcPr><w:tcW w:w=\"0\" w:type=\"auto\"/></w:tcPr><w:p>{}</w:p></w:tc>",
                    run_xml(&string_or_empty(Some(cell)), &style)
                ));
            }
            // A row must hold at least one cell.
            if cells.is_empty() {
                self.body.push_str("<w:tc><w:p/></w:tc>");
            }
            self.body.push_str("</w:tr>");
        }
        self.body.push_str("</w:tbl><w:p/>");
        Ok(())
    }

    fn image(&mut self, index: usize, item: &[(String, Value)]) -> Result<(), HostError> {
        let at = format!("{AT}: elements[{index}]");
        let data = require_bytes(&at, member(item, "data"), "data")?;
        let Some((extension, _)) = image_kind(data) else {
            return Err(element_error_as(
                HostErrorCode::Unsupported,
                index,
                "data is not a PNG, JPEG, GIF or BMP image",
            ));
        };
        self.image_bytes += data.len();
        if self.image_bytes > MAX_IMAGE_BYTES {
            return Err(element_error_as(
                HostErrorCode::LimitExceeded,
                index,
                &format!("brings the document's images past the {MAX_IMAGE_BYTES} byte limit"),
            ));
        }
        let inches = |key: &str| number_of(member(item, key)).filter(|n| *n > 0.0 && *n <= 100.0);
        let (width, height) = match (inches("width"), inches("height"), image_pixels(data)) {
            (Some(w), Some(h), _) => (w, h),
            (w, h, Some((pw, ph))) if pw > 0 && ph > 0 => {
                let aspect = f64::from(ph) / f64::from(pw);
                match (w, h) {
                    (Some(w), None) => (w, w * aspect),
                    (None, Some(h)) => (h / aspect, h),
                    _ => {
                        let w = (f64::from(pw) / 96.0).min(6.0);
                        (w, w * aspect)
                    }
                }
            }
            (w, h, _) => (w.unwrap_or(200.0 / 96.0), h.unwrap_or(200.0 / 96.0)),
        };
        let (cx, cy) = (
            (width * EMU_PER_INCH) as u64,
            (height * EMU_PER_INCH) as u64,
        );
        let n = self.images.len() + 1;
        let id = format!("rIdImage{n}");
        let name = format!("media/image{n}.{extension}");
        self.drawings += 1;
        let d = self.drawings;
        self.body.push_str(&format!(
            "<w:p><w:r><w:drawing><wp:inline distT=\"0\" distB=\"0\" distL=\"0\" distR=\"0\"><wp:extent cx=\"{cx}\" cy=\"{cy}\"/><wp:docPr id=\"{d}\" name=\"Picture {d}\"/><wp:cNvGraphicFramePr><a:graphicFrameLocks noChangeAspect=\"1\"/></wp:cNvGraphicFramePr><a:graphic><a:graphicData uri=\"http://schemas.openxmlformats.org/drawingml/2006/picture\"><pic:pic><pic:nvPicPr><pic:cNvPr id=\"{d}\" name=\"image{n}.{extension}\"/><pic:cNvPicPr/></pic:nvPicPr><pic:blipFill><a:blip r:embed=\"{id}\"/><a:stretch><a:fillRect/></a:stretch></pic:blipFill><pic:spPr><a:xfrm><a:off x=\"0\" y=\"0\"/><a:ext cx=\"{cx}\" cy=\"{cy}\"/></a:xfrm><a:prstGeom prst=\"rect\"><a:avLst/></a:prstGeom></pic:spPr></pic:pic></a:graphicData></a:graphic></wp:inline></w:drawing></w:r></w:p>"
        ));
        self.images.push((id, name, data.to_vec()));
        Ok(())
    }

    fn package(self, properties: &[(String, Value)]) -> Result<Vec<u8>, DocError> {
        let mut package = Package::new();
        let mut types = String::from(
            "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"yes\"?>\n<Types xmlns=\"http://schemas.openxmlformats.org/package/2006/content-types\"><Default Extension=\"rels\" ContentType=\"application/vnd.openxmlformats-package.relationships+xml\"/><Default Extension=\"xml\" ContentType=\"application/xml\"/>",
        );
        for (extension, mime) in [
            ("png", "image/png"),
            ("jpeg", "image/jpeg"),
            ("gif", "image/gif"),
            ("bmp", "image/bmp"),
        ] {
            if self.images.iter().any(|(_, n, _)| n.ends_with(extension)) {
                types.push_str(&format!(
                    "<Default Extension=\"{extension}\" ContentType=\"{mime}\"/>"
                ));
            }
        }
        types.push_str("<Override PartName=\"/word/document.xml\" ContentType=\"application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml\"/><Override PartName=\"/word/styles.xml\" ContentType=\"application/vnd.openxmlformats-officedocument.wordprocessingml.styles+xml\"/><Override PartName=\"/word/numbering.xml\" ContentType=\"application/vnd.openxmlformats-officedocument.wordprocessingml.numbering+xml\"/><Override PartName=\"/docProps/core.xml\" ContentType=\"application/vnd.openxmlformats-package.core-properties+xml\"/><Override PartName=\"/docProps/app.xml\" ContentType=\"application/vnd.openxmlformats-officedocument.extended-properties+xml\"/></Types>");
        package.add("[Content_Types].xml", types)?;
        package.add("_rels/.rels", "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"yes\"?>\n<Relationships xmlns=\"http://schemas.openxmlformats.org/package/2006/relationships\"><Relationship Id=\"rId1\" Type=\"http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument\" Target=\"word/document.xml\"/><Relationship Id=\"rId2\" Type=\"http://schemas.openxmlformats.org/package/2006/relationships/metadata/core-properties\" Target=\"docProps/core.xml\"/><Relationship Id=\"rId3\" Type=\"http://schemas.openxmlformats.org/officeDocument/2006/relationships/extended-properties\" Target=\"docProps/app.xml\"/></Relationships>")?;
        let text = |key: &str| match member(properties, key) {
            Some(Value::String(s)) if !s.is_empty() => Some(xml_text(s)),
            _ => None,
        };
        let mut core = String::from(
            "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"yes\"?>\n<cp:coreProperties xmlns:cp=\"http://schemas.openxmlformats.org/package/2006/metadata/core-properties\" xmlns:dc=\"http://purl.org/dc/elements/1.1/\" xmlns:dcterms=\"http://purl.org/dc/terms/\" xmlns:xsi=\"http://www.w3.org/2001/XMLSchema-instance\">",
        );
        for (key, tag) in [
            ("title", "dc:title"),
            ("subject", "dc:subject"),
            ("author", "dc:creator"),
            ("keywords", "cp:keywords"),
        ] {
            if let Some(v) = text(key) {
                core.push_str(&format!("<{tag}>{v}</{tag}>"));
            }
        }
        core.push_str("</cp:coreProperties>");
        package.add("docProps/core.xml", core)?;
        package.add("docProps/app.xml", "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"yes\"?>\n<Properties xmlns=\"http://schemas.openxmlformats.org/officeDocument/2006/extended-properties\"><Application>NodeTool</Application></Properties>")?;
        let mut rels = String::from(
            "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"yes\"?>\n<Relationships xmlns=\"http://schemas.openxmlformats.org/package/2006/relationships\"><Relationship Id=\"rIdStyles\" Type=\"http://schemas.openxmlformats.org/officeDocument/2006/relationships/styles\" Target=\"styles.xml\"/><Relationship Id=\"rIdNumbering\" Type=\"http://schemas.openxmlformats.org/officeDocument/2006/relationships/numbering\" Target=\"numbering.xml\"/>",
        );
        for (id, name, _) in &self.images {
            rels.push_str(&format!("<Relationship Id=\"{id}\" Type=\"http://schemas.openxmlformats.org/officeDocument/2006/relationships/image\" Target=\"{name}\"/>"));
        }
        for (id, url) in &self.links {
            rels.push_str(&format!("<Relationship Id=\"{id}\" Type=\"http://schemas.openxmlformats.org/officeDocument/2006/relationships/hyperlink\" Target=\"{}\" TargetMode=\"External\"/>", xml_text(url)));
        }
        rels.push_str("</Relationships>");
        package.add("word/_rels/document.xml.rels", rels)?;
        package.add("word/styles.xml", styles())?;
        package.add("word/numbering.xml", numbering(self.numbered_lists))?;
        let document = format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"yes\"?>\n<w:document xmlns:w=\"http://schemas.openxmlformats.org/wordprocessingml/2006/main\" xmlns:r=\"http://schemas.openxmlformats.org/officeDocument/2006/relationships\" xmlns:wp=\"http://schemas.openxmlformats.org/drawingml/2006/wordprocessingDrawing\" xmlns:a=\"http://schemas.openxmlformats.org/drawingml/2006/main\" xmlns:pic=\"http://schemas.openxmlformats.org/drawingml/2006/picture\"><w:body>{}<w:sectPr><w:pgSz w:w=\"12240\" w:h=\"15840\"/><w:pgMar w:top=\"1440\" w:right=\"1440\" w:bottom=\"1440\" w:left=\"1440\" w:header=\"708\" w:footer=\"708\" w:gutter=\"0\"/></w:sectPr></w:body></w:document>",
            self.body
        );
        package.add("word/document.xml", document)?;
        for (_, name, data) in self.images {
            package.add(format!("word/{name}"), data)?;
        }
        package.finish()
    }
}

#[derive(Clone, Copy, Default)]
struct RunStyle {
    bold: bool,
    italic: bool,
    underline: bool,
    /// Font size in half-points, `None` for the style's own.
    half_points: Option<u32>,
}

fn half_points(value: Option<&Value>, default: f64) -> Option<u32> {
    let points = number_of(value).unwrap_or(default).clamp(1.0, 1638.0);
    Some((points * 2.0).round() as u32)
}

/// One run: text with its breaks and tabs, in a style.
fn run_xml(text: &str, style: &RunStyle) -> String {
    let mut props = String::new();
    if style.bold {
        props.push_str("<w:b/>");
    }
    if style.italic {
        props.push_str("<w:i/>");
    }
    if style.underline {
        props.push_str("<w:u w:val=\"single\"/>");
    }
    if let Some(hp) = style.half_points {
        props.push_str(&format!("<w:sz w:val=\"{hp}\"/><w:szCs w:val=\"{hp}\"/>"));
    }
    let mut out = format!("<w:r><w:rPr>{props}</w:rPr>");
    let text = text.replace("\r\n", "\n");
    for (i, line) in text.split(['\n', '\r']).enumerate() {
        if i > 0 {
            out.push_str("<w:br/>");
        }
        for (j, piece) in line.split('\t').enumerate() {
            if j > 0 {
                out.push_str("<w:tab/>");
            }
            if !piece.is_empty() {
                out.push_str(&format!(
                    "<w:t xml:space=\"preserve\">{}</w:t>",
                    xml_text(piece)
                ));
            }
        }
    }
    out.push_str("</w:r>");
    out
}

fn styles() -> String {
    let mut out = String::from(
        "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"yes\"?>\n<w:styles xmlns:w=\"http://schemas.openxmlformats.org/wordprocessingml/2006/main\"><w:docDefaults><w:rPrDefault><w:rPr><w:rFonts w:ascii=\"Calibri\" w:hAnsi=\"Calibri\" w:eastAsia=\"Calibri\" w:cs=\"Calibri\"/><w:sz w:val=\"24\"/><w:szCs w:val=\"24\"/></w:rPr></w:rPrDefault><w:pPrDefault><w:pPr><w:spacing w:after=\"120\"/></w:pPr></w:pPrDefault></w:docDefaults><w:style w:type=\"paragraph\" w:default=\"1\" w:styleId=\"Normal\"><w:name w:val=\"Normal\"/><w:qFormat/></w:style>",
    );
    for (level, size) in [(1, 32), (2, 28), (3, 26), (4, 24), (5, 22), (6, 22)] {
        out.push_str(&format!("<w:style w:type=\"paragraph\" w:styleId=\"Heading{level}\"><w:name w:val=\"heading {level}\"/><w:basedOn w:val=\"Normal\"/><w:next w:val=\"Normal\"/><w:uiPriority w:val=\"9\"/><w:qFormat/><w:pPr><w:keepNext/><w:spacing w:before=\"240\" w:after=\"120\"/><w:outlineLvl w:val=\"{}\"/></w:pPr><w:rPr><w:b/><w:sz w:val=\"{size}\"/><w:szCs w:val=\"{size}\"/></w:rPr></w:style>", level - 1));
    }
    out.push_str("<w:style w:type=\"paragraph\" w:styleId=\"ListParagraph\"><w:name w:val=\"List Paragraph\"/><w:basedOn w:val=\"Normal\"/><w:qFormat/><w:pPr><w:ind w:left=\"720\"/></w:pPr></w:style><w:style w:type=\"character\" w:styleId=\"Hyperlink\"><w:name w:val=\"Hyperlink\"/><w:rPr><w:color w:val=\"0563C1\"/><w:u w:val=\"single\"/></w:rPr></w:style><w:style w:type=\"table\" w:styleId=\"TableGrid\"><w:name w:val=\"Table Grid\"/><w:tblPr><w:tblBorders><w:top w:val=\"single\" w:sz=\"4\" w:space=\"0\" w:color=\"auto\"/><w:left w:val=\"single\" w:sz=\"4\" w:space=\"0\" w:color=\"auto\"/><w:bottom w:val=\"single\" w:sz=\"4\" w:space=\"0\" w:color=\"auto\"/><w:right w:val=\"single\" w:sz=\"4\" w:space=\"0\" w:color=\"auto\"/><w:insideH w:val=\"single\" w:sz=\"4\" w:space=\"0\" w:color=\"auto\"/><w:insideV w:val=\"single\" w:sz=\"4\" w:space=\"0\" w:color=\"auto\"/></w:tblBorders></w:tblPr></w:style></w:styles>");
    out
}

/// Numbering: `w:num` 1 is the bullets; 2, 3, ... one per numbered list, each restarting at 1.
fn numbering(numbered_lists: usize) -> String {
    let mut out = String::from(
        "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"yes\"?>\n<w:numbering xmlns:w=\"http://schemas.openxmlformats.org/wordprocessingml/2006/main\">",
    );
    for (abstract_id, format) in [(0, "bullet"), (1, "decimal")] {
        out.push_str(&format!("<w:abstractNum w:abstractNumId=\"{abstract_id}\"><w:multiLevelType w:val=\"hybridMultilevel\"/>"));
        for level in 0..9 {
            let text = if format == "bullet" {
                ["\u{2022}", "\u{25e6}", "\u{25aa}"][level % 3].to_string()
            } else {
                format!("%{}.", level + 1)
            };
            out.push_str(&format!("<w:lvl w:ilvl=\"{level}\"><w:start w:val=\"1\"/><w:numFmt w:val=\"{format}\"/><w:lvlText w:val=\"{text}\"/><w:lvlJc w:val=\"left\"/><w:pPr><w:ind w:left=\"{}\" w:hanging=\"360\"/></w:pPr></w:lvl>", 720 * (level + 1)));
        }
        out.push_str("</w:abstractNum>");
    }
    out.push_str("<w:num w:numId=\"1\"><w:abstractNumId w:val=\"0\"/></w:num>");
    for i in 0..numbered_lists {
        out.push_str(&format!("<w:num w:numId=\"{}\"><w:abstractNumId w:val=\"1\"/><w:lvlOverride w:ilvl=\"0\"><w:startOverride w:val=\"1\"/></w:lvlOverride></w:num>", i + 2));
    }
    out.push_str("</w:numbering>");
    out
}
