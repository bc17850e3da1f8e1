//! `pptxgen`: build a PowerPoint file from a plain description, written as PresentationML parts
//! into a deflated package.
//!
//! The reference ran PptxGenJS on the host. The description and messages are its:
//! `{title, author, subject, slides: [{background, items: [...]}]}`, items of type `text`
//! (`text`, `fontSize` 18, `color`, `bold`, `align`), `image` (`data` bytes) and `shape`
//! (`shape`, `fill`), each placed by `x`, `y`, `w`, `h` in inches from the top-left (defaults
//! 0.5, 0.5, 8, 1) on a 10 x 5.625 inch (16:9) slide; 1 to [`MAX_SLIDES`] slides. Beyond it:
//! - a slide's `title` is a real title placeholder (outline views, screen readers and
//!   `pptx.extractSlides` find it), and its `notes` are speaker notes;
//! - a text item may give `bullets: [...]` (strings or `{text, level}`) for a bulleted list, and
//!   `italic`;
//! - `{type: "table", rows, header}` makes a table (cells shown as text, the first row bold with
//!   `header`);
//! - an image without `w`/`h` keeps its own aspect ratio;
//! - equal descriptions give byte-identical files.
//!
//! Bounds: [`MAX_SLIDES`] slides, [`MAX_ITEMS`] items, [`MAX_TABLE_CELLS`] cells,
//! [`MAX_IMAGE_BYTES`] of images, and the package within the result cap.

use nodetool_protocol::value::Value;

use super::ooxml::{
    Package, check_written, image_kind, image_pixels, member, number_of, string_or_empty, truthy,
    xml_text,
};
use super::{DocError, check_deadline};
use crate::error::HostError;
use crate::limits::{options_of, require_bytes};

/// Slides one presentation may have (the reference's limit).
pub const MAX_SLIDES: usize = 200;
/// Items one presentation may have, every slide together.
pub const MAX_ITEMS: usize = 20_000;
/// Table cells one presentation may have.
pub const MAX_TABLE_CELLS: usize = 100_000;
/// Bytes of images one presentation may embed.
pub const MAX_IMAGE_BYTES: usize = 50 * 1024 * 1024;

const AT: &str = "pptxgen.build";
const EMU: f64 = 914_400.0;
const SLIDE_CX: u64 = 9_144_000;
const SLIDE_CY: u64 = 5_143_500;

/// `build(spec)` -> the .pptx as bytes.
pub fn build(args: &[Value]) -> Result<Value, HostError> {
    let spec = options_of(args.first());
    let slides: &[Value] = match member(spec, "slides") {
        Some(Value::Array(s)) => s,
        _ => &[],
    };
    if slides.is_empty() {
        return Err(HostError::invalid(format!(
            "{AT}: provide at least one slide"
        )));
    }
    if slides.len() > MAX_SLIDES {
        return Err(HostError::limit(format!(
            "{AT}: at most {MAX_SLIDES} slides"
        )));
    }
    let mut deck = Deck::default();
    for (i, raw) in slides.iter().enumerate() {
        let Value::Object(slide) = raw else {
            return Err(HostError::invalid(format!(
                "{AT}: slides[{i}] must be an object"
            )));
        };
        check_deadline().map_err(|e| e.at(AT))?;
        deck.slide(i, slide)?;
        let written = deck
            .slides
            .iter()
            .map(|(x, r, n)| x.len() + r.len() + n.len())
            .sum();
        check_written(written).map_err(|e| e.at(AT))?;
    }
    deck.package(spec).map(Value::Bytes).map_err(|e| e.at(AT))
}

#[derive(Default)]
struct Deck {
    /// (slide XML, its relationships' XML entries, its notes text).
    slides: Vec<(String, String, String)>,
    /// (part name under ppt/media, bytes).
    media: Vec<(String, Vec<u8>)>,
    media_bytes: usize,
    items: usize,
    cells: usize,
}

fn color(value: Option<&Value>, default: &str) -> String {
    let raw = string_or_empty(value);
    let hex = raw.trim().trim_start_matches('#');
    let hex = if hex.len() == 3 {
        hex.chars().flat_map(|c| [c, c]).collect::<String>()
    } else {
        hex.to_string()
    };
    if hex.len() == 6 && hex.chars().all(|c| c.is_ascii_hexdigit()) {
        hex.to_ascii_uppercase()
    } else {
        default.to_string()
    }
}

fn emu(inches: f64) -> i64 {
    (inches.clamp(-100.0, 100.0) * EMU).round() as i64
}

struct BoxSpec {
    x: i64,
    y: i64,
    w: i64,
    h: i64,
}

fn box_of(item: &[(String, Value)]) -> (Option<f64>, Option<f64>, BoxSpec) {
    let get = |a: &str, b: &str| number_of(member(item, a).or_else(|| member(item, b)));
    let (w, h) = (get("w", "width"), get("h", "height"));
    let b = BoxSpec {
        x: emu(number_of(member(item, "x")).unwrap_or(0.5)),
        y: emu(number_of(member(item, "y")).unwrap_or(0.5)),
        w: emu(w.unwrap_or(8.0)),
        h: emu(h.unwrap_or(1.0)),
    };
    (w, h, b)
}

fn xfrm(b: &BoxSpec) -> String {
    format!(
        "<a:xfrm><a:off x=\"{}\" y=\"{}\"/><a:ext cx=\"{}\" cy=\"{}\"/></a:xfrm>",
        b.x,
        b.y,
        b.w.max(0),
        b.h.max(0)
    )
}

struct Run<'a> {
    text: &'a str,
    size: f64,
    color: &'a str,
    bold: bool,
    italic: bool,
}

fn run(r: &Run<'_>) -> String {
    let mut out = String::new();
    for (i, line) in r.text.split('\n').enumerate() {
        if i > 0 {
            out.push_str("<a:br/>");
        }
        out.push_str(&format!(
            "<a:r><a:rPr lang=\"en-US\" sz=\"{}\" b=\"{}\" i=\"{}\" dirty=\"0\"><a:solidFill><a:srgbClr val=\"{}\"/></a:solidFill></a:rPr><a:t>{}</a:t></a:r>",
            (r.size * 100.0).round().clamp(100.0, 400_000.0) as u32,
            u8::from(r.bold),
            u8::from(r.italic),
            r.color,
            xml_text(line)
        ));
    }
    out
}

impl Deck {
    fn slide(&mut self, i: usize, slide: &[(String, Value)]) -> Result<(), HostError> {
        let mut shapes = String::new();
        let mut rels = String::from(
            "<Relationship Id=\"rId1\" Type=\"http://schemas.openxmlformats.org/officeDocument/2006/relationships/slideLayout\" Target=\"../slideLayouts/slideLayout1.xml\"/>",
        );
        let mut next_id = 2u32;
        let mut next_rel = 2u32;
        if let Some(Value::String(title)) = member(slide, "title") {
            shapes.push_str(&format!(
                "<p:sp><p:nvSpPr><p:cNvPr id=\"{next_id}\" name=\"Title {next_id}\"/><p:cNvSpPr><a:spLocks noGrp=\"1\"/></p:cNvSpPr><p:nvPr><p:ph type=\"title\"/></p:nvPr></p:nvSpPr><p:spPr>{}</p:spPr><p:txBody><a:bodyPr/><a:lstStyle/><a:p>{}</a:p></p:txBody></p:sp>",
                xfrm(&BoxSpec { x: emu(0.5), y: emu(0.25), w: emu(9.0), h: emu(0.9) }),
                run(&Run { text: title, size: 32.0, color: "000000", bold: true, italic: false })
            ));
            next_id += 1;
        }
        let items: &[Value] = match member(slide, "items") {
            Some(Value::Array(items)) => items,
            _ => &[],
        };
        for (j, raw) in items.iter().enumerate() {
            self.items += 1;
            if self.items > MAX_ITEMS {
                return Err(HostError::limit(format!(
                    "{AT}: more than {MAX_ITEMS} items"
                )));
            }
            let at = format!("{AT}: slides[{i}].items[{j}]");
            let Value::Object(item) = raw else {
                return Err(HostError::invalid(format!("{at} must be an object")));
            };
            let kind = string_or_empty(member(item, "type"));
            let (w, h, b) = box_of(item);
            let id = next_id;
            next_id += 1;
            match kind.as_str() {
                "text" => {
                    let size = number_of(member(item, "fontSize")).unwrap_or(18.0);
                    let color = color(member(item, "color"), "000000");
                    let (bold, italic) =
                        (truthy(member(item, "bold")), truthy(member(item, "italic")));
                    let align = match string_or_empty(member(item, "align")).as_str() {
                        "center" => "ctr",
                        "right" => "r",
                        "justify" => "just",
                        _ => "l",
                    };
                    let mut body = String::new();
                    if let Some(Value::Array(bullets)) = member(item, "bullets") {
                        for bullet in bullets {
                            let (text, level) = match bullet {
                                Value::Object(m) => (
                                    string_or_empty(member(m, "text")),
                                    number_of(member(m, "level")).unwrap_or(0.0).clamp(0.0, 8.0)
                                        as u32,
                                ),
                                other => (string_or_empty(Some(other)), 0),
                            };
                            body.push_str(&format!(
                                "<a:p><a:pPr marL=\"{}\" lvl=\"{level}\" indent=\"-285750\" algn=\"{align}\"><a:buFont typeface=\"Arial\"/><a:buChar char=\"\u{2022}\"/></a:pPr>{}</a:p>",
                                285_750 * (level + 1),
                                run(&Run { text: &text, size, color: &color, bold, italic })
                            ));
                        }
                    } else {
                        for line in string_or_empty(member(item, "text")).split('\n') {
                            body.push_str(&format!(
                                "<a:p><a:pPr algn=\"{align}\"/>{}</a:p>",
                                run(&Run {
                                    text: line,
                                    size,
                                    color: &color,
                                    bold,
                                    italic
                                })
                            ));
                        }
                    }
                    shapes.push_str(&format!(
                        "<p:sp><p:nvSpPr><p:cNvPr id=\"{id}\" name=\"Text {id}\"/><p:cNvSpPr txBox=\"1\"/><p:nvPr/></p:nvSpPr><p:spPr>{}<a:prstGeom prst=\"rect\"><a:avLst/></a:prstGeom><a:noFill/></p:spPr><p:txBody><a:bodyPr wrap=\"square\" rtlCol=\"0\"><a:spAutoFit/></a:bodyPr><a:lstStyle/>{body}</p:txBody></p:sp>",
                        xfrm(&b)
                    ));
                }
                "image" => {
                    let data = require_bytes(&at, member(item, "data"), "data")?;
                    let Some((extension, _)) = image_kind(data) else {
                        return Err(HostError::unsupported(format!(
                            "{at}: data is not a PNG, JPEG, GIF or BMP image"
                        )));
                    };
                    self.media_bytes += data.len();
                    if self.media_bytes > MAX_IMAGE_BYTES {
                        return Err(HostError::limit(format!(
                            "{at} brings the images past the {MAX_IMAGE_BYTES} byte limit"
                        )));
                    }
                    let mut b = b;
                    if let (Some((pw, ph)), true) = (image_pixels(data), w.is_none() || h.is_none())
                        && pw > 0
                        && ph > 0
                    {
                        let aspect = f64::from(ph) / f64::from(pw);
                        match (w, h) {
                            (Some(_), None) => b.h = (b.w as f64 * aspect) as i64,
                            (None, Some(_)) => b.w = (b.h as f64 / aspect) as i64,
                            _ => {
                                b.w = emu((f64::from(pw) / 96.0).min(9.0));
                                b.h = (b.w as f64 * aspect) as i64;
                            }
                        }
                    }
                    let name = format!("image{}.{extension}", self.media.len() + 1);
                    let rel = format!("rId{next_rel}");
                    next_rel += 1;
                    rels.push_str(&format!("<Relationship Id=\"{rel}\" Type=\"http://schemas.openxmlformats.org/officeDocument/2006/relationships/image\" Target=\"../media/{name}\"/>"));
                    self.media.push((name, data.to_vec()));
                    shapes.push_str(&format!(
                        "<p:pic><p:nvPicPr><p:cNvPr id=\"{id}\" name=\"Picture {id}\"/><p:cNvPicPr><a:picLocks noChangeAspect=\"1\"/></p:cNvPicPr><p:nvPr/></p:nvPicPr><p:blipFill><a:blip r:embed=\"{rel}\"/><a:stretch><a:fillRect/></a:stretch></p:blipFill><p:spPr>{}<a:prstGeom prst=\"rect\"><a:avLst/></a:prstGeom></p:spPr></p:pic>",
                        xfrm(&b)
                    ));
                }
                "shape" => {
                    let preset = match string_or_empty(member(item, "shape")).as_str() {
                        "" | "rect" | "rectangle" => "rect",
                        "roundRect" => "roundRect",
                        "ellipse" | "oval" | "circle" => "ellipse",
                        "triangle" => "triangle",
                        "line" => "line",
                        "rightArrow" | "arrow" => "rightArrow",
                        other => {
                            return Err(HostError::invalid(format!(
                                "{at} has unknown shape \"{other}\" (rect, roundRect, ellipse, triangle, line, rightArrow)"
                            )));
                        }
                    };
                    let fill = color(member(item, "fill"), "2563EB");
                    shapes.push_str(&format!(
                        "<p:sp><p:nvSpPr><p:cNvPr id=\"{id}\" name=\"Shape {id}\"/><p:cNvSpPr/><p:nvPr/></p:nvSpPr><p:spPr>{}<a:prstGeom prst=\"{preset}\"><a:avLst/></a:prstGeom><a:solidFill><a:srgbClr val=\"{fill}\"/></a:solidFill></p:spPr></p:sp>",
                        xfrm(&b)
                    ));
                }
                "table" => shapes.push_str(&self.table(&at, id, item, &b)?),
                other => {
                    return Err(HostError::invalid(format!(
                        "{at} has unknown type \"{other}\""
                    )));
                }
            }
        }
        let background = match member(slide, "background") {
            Some(Value::String(_)) => format!(
                "<p:bg><p:bgPr><a:solidFill><a:srgbClr val=\"{}\"/></a:solidFill><a:effectLst/></p:bgPr></p:bg>",
                color(member(slide, "background"), "FFFFFF")
            ),
            _ => String::new(),
        };
        let notes = match member(slide, "notes") {
            Some(Value::String(n)) => n.clone(),
            _ => String::new(),
        };
        if !notes.is_empty() {
            rels.push_str(&format!("<Relationship Id=\"rId{next_rel}\" Type=\"http://schemas.openxmlformats.org/officeDocument/2006/relationships/notesSlide\" Target=\"../notesSlides/notesSlide{}.xml\"/>", i + 1));
        }
        let xml = format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"yes\"?>\n<p:sld xmlns:a=\"http://schemas.openxmlformats.org/drawingml/2006/main\" xmlns:r=\"http://schemas.openxmlformats.org/officeDocument/2006/relationships\" xmlns:p=\"http://schemas.openxmlformats.org/presentationml/2006/main\"><p:cSld>{background}<p:spTree><p:nvGrpSpPr><p:cNvPr id=\"1\" name=\"\"/><p:cNvGrpSpPr/><p:nvPr/></p:nvGrpSpPr><p:grpSpPr/>{shapes}</p:spTree></p:cSld><p:clrMapOvr><a:masterClrMapping/></p:clrMapOvr></p:sld>"
        );
        self.slides.push((xml, rels, notes));
        Ok(())
    }

    fn table(
        &mut self,
        at: &str,
        id: u32,
        item: &[(String, Value)],
        b: &BoxSpec,
    ) -> Result<String, HostError> {
        let rows: &[Value] = match member(item, "rows") {
            Some(Value::Array(r)) => r,
            _ => {
                return Err(HostError::invalid(format!(
                    "{at}: rows must be an array of arrays"
                )));
            }
        };
        let columns = rows
            .iter()
            .map(|r| match r {
                Value::Array(c) => c.len(),
                _ => 0,
            })
            .max()
            .unwrap_or(0)
            .max(1);
        let header = truthy(member(item, "header"));
        let size = number_of(member(item, "fontSize")).unwrap_or(14.0);
        let col_w = b.w.max(0) / columns as i64;
        let row_h = if rows.is_empty() {
            0
        } else {
            b.h.max(0) / rows.len() as i64
        };
        let mut grid = String::new();
        for _ in 0..columns {
            grid.push_str(&format!("<a:gridCol w=\"{col_w}\"/>"));
        }
        let mut body = String::new();
        for (r, row) in rows.iter().enumerate() {
            let cells: &[Value] = match row {
                Value::Array(c) => c,
                _ => &[],
            };
            self.cells += columns;
            if self.cells > MAX_TABLE_CELLS {
                return Err(HostError::limit(format!(
                    "{at} brings the tables past the {MAX_TABLE_CELLS} cell limit"
                )));
            }
            body.push_str(&format!("<a:tr h=\"{row_h}\">"));
            for c in 0..columns {
                let text = string_or_empty(cells.get(c));
                body.push_str(&format!(
                    "<a:tc><a:txBody><a:bodyPr/><a:lstStyle/><a:p>{}</a:p></a:txBody><a:tcPr/></a:tc>",
                    run(&Run { text: &text, size, color: "000000", bold: header && r == 0, italic: false })
                ));
            }
            body.push_str("</a:tr>");
        }
        Ok(format!(
            "<p:graphicFrame><p:nvGraphicFramePr><p:cNvPr id=\"{id}\" name=\"Table {id}\"/><p:cNvGraphicFramePr><a:graphicFrameLocks noGrp=\"1\"/></p:cNvGraphicFramePr><p:nvPr/></p:nvGraphicFramePr><p:xfrm><a:off x=\"{}\" y=\"{}\"/><a:ext cx=\"{}\" cy=\"{}\"/></p:xfrm><a:graphic><a:graphicData uri=\"http://schemas.openxmlformats.org/drawingml/2006/table\"><a:tbl><a:tblPr firstRow=\"{}\" bandRow=\"1\"/><a:tblGrid>{grid}</a:tblGrid>{body}</a:tbl></a:graphicData></a:graphic></p:graphicFrame>",
            b.x,
            b.y,
            b.w.max(0),
            b.h.max(0),
            u8::from(header)
        ))
    }

    fn package(self, spec: &[(String, Value)]) -> Result<Vec<u8>, DocError> {
        const XML: &str = "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"yes\"?>\n";
        const NS: &str = "xmlns:a=\"http://schemas.openxmlformats.org/drawingml/2006/main\" xmlns:r=\"http://schemas.openxmlformats.org/officeDocument/2006/relationships\" xmlns:p=\"http://schemas.openxmlformats.org/presentationml/2006/main\"";
        const REL: &str = "http://schemas.openxmlformats.org/officeDocument/2006/relationships";
        let rels = |entries: &str| {
            format!(
                "{XML}<Relationships xmlns=\"http://schemas.openxmlformats.org/package/2006/relationships\">{entries}</Relationships>"
            )
        };
        let has_notes = self.slides.iter().any(|(_, _, n)| !n.is_empty());
        let mut package = Package::new();

        let mut types = String::from(
            "<Types xmlns=\"http://schemas.openxmlformats.org/package/2006/content-types\"><Default Extension=\"rels\" ContentType=\"application/vnd.openxmlformats-package.relationships+xml\"/><Default Extension=\"xml\" ContentType=\"application/xml\"/>",
        );
        for (extension, mime) in [
            ("png", "image/png"),
            ("jpeg", "image/jpeg"),
            ("gif", "image/gif"),
            ("bmp", "image/bmp"),
        ] {
            if self.media.iter().any(|(n, _)| n.ends_with(extension)) {
                types.push_str(&format!(
                    "<Default Extension=\"{extension}\" ContentType=\"{mime}\"/>"
                ));
            }
        }
        let ct = "application/vnd.openxmlformats-officedocument.presentationml";
        types.push_str(&format!("<Override PartName=\"/ppt/presentation.xml\" ContentType=\"{ct}.presentation.main+xml\"/><Override PartName=\"/ppt/slideMasters/slideMaster1.xml\" ContentType=\"{ct}.slideMaster+xml\"/><Override PartName=\"/ppt/slideLayouts/slideLayout1.xml\" ContentType=\"{ct}.slideLayout+xml\"/><Override PartName=\"/ppt/theme/theme1.xml\" ContentType=\"application/vnd.openxmlformats-officedocument.theme+xml\"/><Override PartName=\"/docProps/core.xml\" ContentType=\"application/vnd.openxmlformats-package.core-properties+xml\"/><Override PartName=\"/docProps/app.xml\" ContentType=\"application/vnd.openxmlformats-officedocument.extended-properties+xml\"/>"));
        if has_notes {
            types.push_str(&format!("<Override PartName=\"/ppt/notesMasters/notesMaster1.xml\" ContentType=\"{ct}.notesMaster+xml\"/><Override PartName=\"/ppt/theme/theme2.xml\" ContentType=\"application/vnd.openxmlformats-officedocument.theme+xml\"/>"));
        }
        for (i, (_, _, notes)) in self.slides.iter().enumerate() {
            types.push_str(&format!(
                "<Override PartName=\"/ppt/slides/slide{}.xml\" ContentType=\"{ct}.slide+xml\"/>",
                i + 1
            ));
            if !notes.is_empty() {
                types.push_str(&format!("<Override PartName=\"/ppt/notesSlides/notesSlide{}.xml\" ContentType=\"{ct}.notesSlide+xml\"/>", i + 1));
            }
        }
        types.push_str("</Types>");
        package.add("[Content_Types].xml", format!("{XML}{types}"))?;
        package.add("_rels/.rels", rels(&format!("<Relationship Id=\"rId1\" Type=\"{REL}/officeDocument\" Target=\"ppt/presentation.xml\"/><Relationship Id=\"rId2\" Type=\"http://schemas.openxmlformats.org/package/2006/relationships/metadata/core-properties\" Target=\"docProps/core.xml\"/><Relationship Id=\"rId3\" Type=\"{REL}/extended-properties\" Target=\"docProps/app.xml\"/>")))?;

        let text = |key: &str| match member(spec, key) {
            Some(Value::String(s)) if !s.is_empty() => Some(xml_text(s)),
            _ => None,
        };
        let mut core = format!(
            "{XML}<cp:coreProperties xmlns:cp=\"http://schemas.openxmlformats.org/package/2006/metadata/core-properties\" xmlns:dc=\"http://purl.org/dc/elements/1.1/\" xmlns:dcterms=\"http://purl.org/dc/terms/\" xmlns:xsi=\"http://www.w3.org/2001/XMLSchema-instance\">"
        );
        for (key, tag) in [
            ("title", "dc:title"),
            ("subject", "dc:subject"),
            ("author", "dc:creator"),
        ] {
            if let Some(v) = text(key) {
                core.push_str(&format!("<{tag}>{v}</{tag}>"));
            }
        }
        core.push_str("</cp:coreProperties>");
        package.add("docProps/core.xml", core)?;
        package.add("docProps/app.xml", format!("{XML}<Properties xmlns=\"http://schemas.openxmlformats.org/officeDocument/2006/extended-properties\"><Application>NodeTool</Application><Slides>{}</Slides></Properties>", self.slides.len()))?;

        let mut presentation_rels = format!(
            "<Relationship Id=\"rIdMaster\" Type=\"{REL}/slideMaster\" Target=\"slideMasters/slideMaster1.xml\"/><Relationship Id=\"rIdTheme\" Type=\"{REL}/theme\" Target=\"theme/theme1.xml\"/>"
        );
        let mut ids = String::new();
        for i in 0..self.slides.len() {
            presentation_rels.push_str(&format!("<Relationship Id=\"rIdSlide{}\" Type=\"{REL}/slide\" Target=\"slides/slide{}.xml\"/>", i + 1, i + 1));
            ids.push_str(&format!(
                "<p:sldId id=\"{}\" r:id=\"rIdSlide{}\"/>",
                256 + i,
                i + 1
            ));
        }
        let notes_master_list = if has_notes {
            presentation_rels.push_str(&format!("<Relationship Id=\"rIdNotesMaster\" Type=\"{REL}/notesMaster\" Target=\"notesMasters/notesMaster1.xml\"/>"));
            "<p:notesMasterIdLst><p:notesMasterId r:id=\"rIdNotesMaster\"/></p:notesMasterIdLst>"
        } else {
            ""
        };
        package.add("ppt/_rels/presentation.xml.rels", rels(&presentation_rels))?;
        package.add("ppt/presentation.xml", format!("{XML}<p:presentation {NS} saveSubsetFonts=\"1\"><p:sldMasterIdLst><p:sldMasterId id=\"2147483648\" r:id=\"rIdMaster\"/></p:sldMasterIdLst>{notes_master_list}<p:sldIdLst>{ids}</p:sldIdLst><p:sldSz cx=\"{SLIDE_CX}\" cy=\"{SLIDE_CY}\"/><p:notesSz cx=\"6858000\" cy=\"9144000\"/><p:defaultTextStyle/></p:presentation>"))?;

        let tree = "<p:spTree><p:nvGrpSpPr><p:cNvPr id=\"1\" name=\"\"/><p:cNvGrpSpPr/><p:nvPr/></p:nvGrpSpPr><p:grpSpPr/></p:spTree>";
        package.add("ppt/slideMasters/slideMaster1.xml", format!("{XML}<p:sldMaster {NS}><p:cSld><p:bg><p:bgRef idx=\"1001\"><a:schemeClr val=\"bg1\"/></p:bgRef></p:bg>{tree}</p:cSld><p:clrMap bg1=\"lt1\" tx1=\"dk1\" bg2=\"lt2\" tx2=\"dk2\" accent1=\"accent1\" accent2=\"accent2\" accent3=\"accent3\" accent4=\"accent4\" accent5=\"accent5\" accent6=\"accent6\" hlink=\"hlink\" folHlink=\"folHlink\"/><p:sldLayoutIdLst><p:sldLayoutId id=\"2147483649\" r:id=\"rId1\"/></p:sldLayoutIdLst><p:txStyles><p:titleStyle/><p:bodyStyle/><p:otherStyle/></p:txStyles></p:sldMaster>"))?;
        package.add("ppt/slideMasters/_rels/slideMaster1.xml.rels", rels(&format!("<Relationship Id=\"rId1\" Type=\"{REL}/slideLayout\" Target=\"../slideLayouts/slideLayout1.xml\"/><Relationship Id=\"rId2\" Type=\"{REL}/theme\" Target=\"../theme/theme1.xml\"/>")))?;
        package.add("ppt/slideLayouts/slideLayout1.xml", format!("{XML}<p:sldLayout {NS} type=\"blank\" preserve=\"1\"><p:cSld name=\"Blank\">{tree}</p:cSld><p:clrMapOvr><a:masterClrMapping/></p:clrMapOvr></p:sldLayout>"))?;
        package.add("ppt/slideLayouts/_rels/slideLayout1.xml.rels", rels(&format!("<Relationship Id=\"rId1\" Type=\"{REL}/slideMaster\" Target=\"../slideMasters/slideMaster1.xml\"/>")))?;
        package.add("ppt/theme/theme1.xml", theme())?;
        if has_notes {
            package.add("ppt/notesMasters/notesMaster1.xml", format!("{XML}<p:notesMaster {NS}><p:cSld>{tree}</p:cSld><p:clrMap bg1=\"lt1\" tx1=\"dk1\" bg2=\"lt2\" tx2=\"dk2\" accent1=\"accent1\" accent2=\"accent2\" accent3=\"accent3\" accent4=\"accent4\" accent5=\"accent5\" accent6=\"accent6\" hlink=\"hlink\" folHlink=\"folHlink\"/></p:notesMaster>"))?;
            package.add("ppt/notesMasters/_rels/notesMaster1.xml.rels", rels(&format!("<Relationship Id=\"rId1\" Type=\"{REL}/theme\" Target=\"../theme/theme2.xml\"/>")))?;
            package.add("ppt/theme/theme2.xml", theme())?;
        }
        for (i, (xml, slide_rels, notes)) in self.slides.iter().enumerate() {
            let n = i + 1;
            package.add(format!("ppt/slides/slide{n}.xml"), xml.as_bytes())?;
            package.add(
                format!("ppt/slides/_rels/slide{n}.xml.rels"),
                rels(slide_rels),
            )?;
            if !notes.is_empty() {
                let mut paragraphs = String::new();
                for line in notes.split('\n') {
                    paragraphs.push_str(&format!(
                        "<a:p><a:r><a:rPr lang=\"en-US\" dirty=\"0\"/><a:t>{}</a:t></a:r></a:p>",
                        xml_text(line)
                    ));
                }
                package.add(format!("ppt/notesSlides/notesSlide{n}.xml"), format!("{XML}<p:notes {NS}><p:cSld><p:spTree><p:nvGrpSpPr><p:cNvPr id=\"1\" name=\"\"/><p:cNvGrpSpPr/><p:nvPr/></p:nvGrpSpPr><p:grpSpPr/><p:sp><p:nvSpPr><p:cNvPr id=\"2\" name=\"Notes Placeholder 1\"/><p:cNvSpPr><a:spLocks noGrp=\"1\"/></p:cNvSpPr><p:nvPr><p:ph type=\"body\" idx=\"1\"/></p:nvPr></p:nvSpPr><p:spPr/><p:txBody><a:bodyPr/><a:lstStyle/>{paragraphs}</p:txBody></p:sp></p:spTree></p:cSld><p:clrMapOvr><a:masterClrMapping/></p:clrMapOvr></p:notes>"))?;
                package.add(format!("ppt/notesSlides/_rels/notesSlide{n}.xml.rels"), rels(&format!("<Relationship Id=\"rId1\" Type=\"{REL}/notesMaster\" Target=\"../notesMasters/notesMaster1.xml\"/><Relationship Id=\"rId2\" Type=\"{REL}/slide\" Target=\"../slides/slide{n}.xml\"/>")))?;
            }
        }
        for (name, data) in self.media {
            package.add(format!("ppt/media/{name}"), data)?;
        }
        package.finish()
    }
}

/// The Office theme's required parts: colours, fonts and the three-of-each format styles.
fn theme() -> String {
    let colors = [
        ("dk1", "<a:sysClr val=\"windowText\" lastClr=\"000000\"/>"),
        ("lt1", "<a:sysClr val=\"window\" lastClr=\"FFFFFF\"/>"),
        ("dk2", "<a:srgbClr val=\"44546A\"/>"),
        ("lt2", "<a:srgbClr val=\"E7E6E6\"/>"),
        ("accent1", "<a:srgbClr val=\"4472C4\"/>"),
        ("accent2", "<a:srgbClr val=\"ED7D31\"/>"),
        ("accent3", "<a:srgbClr val=\"A5A5A5\"/>"),
        ("accent4", "<a:srgbClr val=\"FFC000\"/>"),
        ("accent5", "<a:srgbClr val=\"5B9BD5\"/>"),
        ("accent6", "<a:srgbClr val=\"70AD47\"/>"),
        ("hlink", "<a:srgbClr val=\"0563C1\"/>"),
        ("folHlink", "<a:srgbClr val=\"954F72\"/>"),
    ];
    let mut scheme = String::new();
    for (name, value) in colors {
        scheme.push_str(&format!("<a:{name}>{value}</a:{name}>"));
    }
    let fill = "<a:solidFill><a:schemeClr val=\"phClr\"/></a:solidFill>";
    let line = "<a:ln w=\"6350\"><a:solidFill><a:schemeClr val=\"phClr\"/></a:solidFill></a:ln>";
    let effect = "<a:effectStyle><a:effectLst/></a:effectStyle>";
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"yes\"?>\n<a:theme xmlns:a=\"http://schemas.openxmlformats.org/drawingml/2006/main\" name=\"Office Theme\"><a:themeElements><a:clrScheme name=\"Office\">{scheme}</a:clrScheme><a:fontScheme name=\"Office\"><a:majorFont><a:latin typeface=\"Calibri Light\"/><a:ea typeface=\"\"/><a:cs typeface=\"\"/></a:majorFont><a:minorFont><a:latin typeface=\"Calibri\"/><a:ea typeface=\"\"/><a:cs typeface=\"\"/></a:minorFont></a:fontScheme><a:fmtScheme name=\"Office\"><a:fillStyleLst>{fill}{fill}{fill}</a:fillStyleLst><a:lnStyleLst>{line}{line}{line}</a:lnStyleLst><a:effectStyleLst>{effect}{effect}{effect}</a:effectStyleLst><a:bgFillStyleLst>{fill}{fill}{fill}</a:bgFillStyleLst></a:fmtScheme></a:themeElements></a:theme>"
    )
}
