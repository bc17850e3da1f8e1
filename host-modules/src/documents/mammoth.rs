//! `mammoth`: read a .docx as plain text (`extractRawText`) or as semantic HTML
//! (`convertToHtml`), from its WordprocessingML parts (zip + quick-xml).
//!
//! The reference ran mammoth.js on the host; the output follows mammoth's default rules:
//! - raw text: every paragraph's text followed by a blank line (`"\n\n"`), tabs kept, line
//!   breaks as newlines, deleted text left out;
//! - HTML: paragraphs `<p>`; paragraphs styled "heading 1" to "heading 6" (by style name or id)
//!   `<h1>`-`<h6>` (a "Title" stays a `<p>`, as in mammoth); numbered and bulleted paragraphs
//!   become nested `<ol>` and `<ul>` by their numbering level (the paragraph's own numbering, else
//!   its style's); tables `<table>` with header rows in `<thead>`/`<th>` and
//!   merged columns as `colspan`; bold `<strong>`, italic `<em>`, strikethrough `<s>`,
//!   superscript `<sup>`, subscript `<sub>` (underline is dropped, as mammoth does);
//!   hyperlinks `<a href>` (external URLs, or `#bookmark`); images inline as
//!   `<img src="data:<type>;base64,...">` with their description as `alt`; empty paragraphs left
//!   out.
//!
//! On python-docx documents and on `docx.build`'s, both outputs are byte-identical to
//! mammoth.js 1.13's (`cargo xtask bench documents` checks the raw text of its 50-page file).
//!
//! Bounds: [`MAX_DOCX_ENTRIES`] entries, [`MAX_DOCX_INFLATED_BYTES`] inflated in all (images
//! only when HTML asks for them), the XML depth cap, and the text budget of every document call.

use std::collections::HashMap;

use nodetool_protocol::value::Value;

use super::ooxml::xml_text;
use super::{
    DocError, TextBudget, XmlNode, XmlWalker, attr, base64, folder_of, image_media_type, local,
    relationships, rels_part_of,
};
use crate::archive::{ArchiveLimits, SafeArchive};
use crate::error::HostError;
use crate::limits::require_bytes;

/// Entries a .docx may hold.
pub const MAX_DOCX_ENTRIES: usize = 10_000;
/// Bytes one call may inflate from a .docx, every part read together.
pub const MAX_DOCX_INFLATED_BYTES: u64 = 100 * 1024 * 1024;

/// `extractRawText(bytes)` -> the document's text.
pub fn extract_raw_text(args: &[Value]) -> Result<Value, HostError> {
    const AT: &str = "mammoth.extractRawText";
    let bytes = require_bytes(AT, args.first(), "bytes")?;
    read(bytes, false)
        .map(|d| Value::String(d.raw_text()))
        .map_err(|e| e.at(AT))
}

/// `convertToHtml(bytes)` -> the document as HTML.
pub fn convert_to_html(args: &[Value]) -> Result<Value, HostError> {
    const AT: &str = "mammoth.convertToHtml";
    let bytes = require_bytes(AT, args.first(), "bytes")?;
    let document = read(bytes, true).map_err(|e| e.at(AT))?;
    let mut html = String::new();
    let mut budget = TextBudget::standard();
    render_blocks(
        &document.blocks,
        &document.numbering,
        &mut html,
        &mut budget,
    )
    .map_err(|e| e.at(AT))?;
    Ok(Value::String(html))
}

/// A document read into blocks.
pub struct DocxDocument {
    blocks: Vec<Block>,
    /// numId -> level -> ordered.
    numbering: HashMap<String, HashMap<u8, bool>>,
}

impl DocxDocument {
    /// Mammoth's raw text: each paragraph's text and a blank line.
    pub fn raw_text(&self) -> String {
        let mut out = String::new();
        fn walk(blocks: &[Block], out: &mut String) {
            for block in blocks {
                match block {
                    Block::Paragraph(p) => {
                        out.push_str(&p.text);
                        out.push_str("\n\n");
                    }
                    Block::Table(rows) => {
                        for row in rows {
                            for cell in &row.cells {
                                walk(&cell.blocks, out);
                            }
                        }
                    }
                }
            }
        }
        walk(&self.blocks, &mut out);
        out
    }
}

enum Block {
    Paragraph(Paragraph),
    Table(Vec<Row>),
}

struct Paragraph {
    heading: Option<u8>,
    list: Option<(String, u8)>,
    html: String,
    text: String,
}

struct Row {
    header: bool,
    cells: Vec<Cell>,
}

struct Cell {
    span: u32,
    blocks: Vec<Block>,
}

/// What a run's text is wrapped in.
#[derive(Clone, Copy, PartialEq, Eq, Default)]
struct Format {
    bold: bool,
    italic: bool,
    strike: bool,
    sup: bool,
    sub: bool,
}

impl Format {
    fn tags(&self) -> Vec<&'static str> {
        let mut tags = Vec::new();
        if self.bold {
            tags.push("strong");
        }
        if self.italic {
            tags.push("em");
        }
        if self.strike {
            tags.push("s");
        }
        if self.sup {
            tags.push("sup");
        }
        if self.sub {
            tags.push("sub");
        }
        tags
    }
}

struct Reader<'a, 'b> {
    walker: XmlWalker<'b>,
    archive: &'b mut SafeArchive<'a>,
    /// rId -> (kind, target, external).
    rels: HashMap<String, (String, String, bool)>,
    styles: Styles,
    images: bool,
    budget: TextBudget,
}

fn read(bytes: &[u8], images: bool) -> Result<DocxDocument, DocError> {
    let limits = ArchiveLimits {
        max_entries: MAX_DOCX_ENTRIES,
        max_inflated: MAX_DOCX_INFLATED_BYTES,
    };
    let mut archive =
        SafeArchive::open(bytes, limits).map_err(|e| DocError::archive(e, "a .docx"))?;
    let archive_error = |e| DocError::archive(e, "a .docx");
    let main = main_part(&mut archive)?;
    let Some(document) = archive.read_text(&main).map_err(archive_error)? else {
        return Err(DocError::NotDocument(
            "the bytes are not a .docx file (it has no word/document.xml)".into(),
        ));
    };
    let folder = folder_of(&main).to_string();
    let rels_name = rels_part_of(&main);
    let rels = match archive.read_text(&rels_name).map_err(archive_error)? {
        Some(xml) => relationships(&xml, &rels_name, &folder)?
            .into_iter()
            .map(|(id, kind, target, external)| (id, (kind, target, external)))
            .collect(),
        None => HashMap::new(),
    };
    let part_of = |kind: &str| {
        rels.values()
            .find(|(k, _, external)| k == kind && !external)
            .map(|(_, t, _)| t.clone())
    };
    let styles_part = part_of("styles").unwrap_or_else(|| format!("{folder}/styles.xml"));
    let numbering_part = part_of("numbering").unwrap_or_else(|| format!("{folder}/numbering.xml"));
    let styles = match archive.read_text(&styles_part).map_err(archive_error)? {
        Some(xml) => paragraph_styles(&xml, &styles_part)?,
        None => Styles::default(),
    };
    let numbering = match archive.read_text(&numbering_part).map_err(archive_error)? {
        Some(xml) => numbering_levels(&xml, &numbering_part)?,
        None => HashMap::new(),
    };
    let mut reader = Reader {
        walker: XmlWalker::new(&document, &main, false),
        archive: &mut archive,
        rels,
        styles,
        images,
        budget: TextBudget::standard(),
    };
    let mut blocks = Vec::new();
    while let Some(node) = reader.walker.next()? {
        if let XmlNode::Open(start) = node
            && local(&start) == b"body"
        {
            blocks = reader.blocks()?;
        }
    }
    Ok(DocxDocument { blocks, numbering })
}

/// The main document part, from the package relationships (`word/document.xml` by default).
fn main_part(archive: &mut SafeArchive<'_>) -> Result<String, DocError> {
    let rels = archive
        .read_text("_rels/.rels")
        .map_err(|e| DocError::archive(e, "a .docx"))?;
    if let Some(xml) = rels {
        for (_, kind, target, external) in relationships(&xml, "_rels/.rels", "")? {
            if kind == "officeDocument" && !external {
                return Ok(target);
            }
        }
    }
    Ok("word/document.xml".into())
}

/// What paragraph styles say: heading levels, and the numbering a list style carries.
#[derive(Default)]
struct Styles {
    headings: HashMap<String, u8>,
    /// styleId -> (numId, level).
    numbering: HashMap<String, (String, u8)>,
}

fn paragraph_styles(xml: &str, part: &str) -> Result<Styles, DocError> {
    let mut walker = XmlWalker::new(xml, part, false);
    let mut out = Styles::default();
    let mut current: Option<String> = None;
    let (mut num_id, mut level): (Option<String>, u8) = (None, 0);
    while let Some(node) = walker.next()? {
        let start = match node {
            XmlNode::Open(start) => start,
            XmlNode::Close(name) if name == b"style" => {
                if let (Some(id), Some(n)) = (current.take(), num_id.take()) {
                    out.numbering.insert(id, (n, level));
                }
                level = 0;
                continue;
            }
            _ => continue,
        };
        match local(&start).as_slice() {
            b"style" => {
                current = attr(&start, "styleId");
                if let Some(id) = &current
                    && let Some(level) = heading_level(id)
                {
                    out.headings.insert(id.clone(), level);
                }
            }
            b"name" => {
                if let (Some(id), Some(name)) = (&current, attr(&start, "val"))
                    && let Some(level) = heading_level(&name)
                {
                    out.headings.insert(id.clone(), level);
                }
            }
            b"numId" if current.is_some() => num_id = attr(&start, "val").filter(|v| v != "0"),
            b"ilvl" if current.is_some() => {
                level = attr(&start, "val")
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(0)
                    .min(8)
            }
            _ => {}
        }
    }
    Ok(out)
}

/// "heading 2", "Heading2" -> 2.
fn heading_level(name: &str) -> Option<u8> {
    let lower = name.to_ascii_lowercase();
    let rest = lower.strip_prefix("heading")?.trim_start();
    match rest.parse::<u8>() {
        Ok(n @ 1..=6) => Some(n),
        _ => None,
    }
}

fn numbering_levels(xml: &str, part: &str) -> Result<HashMap<String, HashMap<u8, bool>>, DocError> {
    let mut walker = XmlWalker::new(xml, part, false);
    let mut abstracts: HashMap<String, HashMap<u8, bool>> = HashMap::new();
    let mut nums: Vec<(String, String)> = Vec::new();
    let (mut abstract_id, mut level, mut num_id): (Option<String>, Option<u8>, Option<String>) =
        (None, None, None);
    while let Some(node) = walker.next()? {
        let XmlNode::Open(start) = node else { continue };
        match local(&start).as_slice() {
            b"abstractNum" => abstract_id = attr(&start, "abstractNumId"),
            b"lvl" => level = attr(&start, "ilvl").and_then(|l| l.parse().ok()),
            b"numFmt" => {
                if let (Some(a), Some(l), Some(fmt)) = (&abstract_id, level, attr(&start, "val")) {
                    abstracts
                        .entry(a.clone())
                        .or_default()
                        .insert(l, fmt != "bullet");
                }
            }
            b"num" => num_id = attr(&start, "numId"),
            b"abstractNumId" => {
                if let (Some(n), Some(a)) = (num_id.take(), attr(&start, "val")) {
                    nums.push((n, a));
                }
            }
            _ => {}
        }
    }
    Ok(nums
        .into_iter()
        .map(|(n, a)| (n, abstracts.get(&a).cloned().unwrap_or_default()))
        .collect())
}

impl Reader<'_, '_> {
    /// Blocks until the element that holds them closes (or the part ends).
    fn blocks(&mut self) -> Result<Vec<Block>, DocError> {
        let end = self.walker.depth().saturating_sub(1);
        let mut blocks = Vec::new();
        while self.walker.depth() > end {
            let Some(node) = self.walker.next()? else {
                break;
            };
            let XmlNode::Open(start) = node else { continue };
            match local(&start).as_slice() {
                b"p" => blocks.push(Block::Paragraph(self.paragraph()?)),
                b"tbl" => blocks.push(Block::Table(self.table()?)),
                b"sectPr" | b"del" | b"moveFrom" => self.walker.skip_element()?,
                // Content controls, inserted text and the like: their content counts.
                _ => {}
            }
        }
        Ok(blocks)
    }

    fn table(&mut self) -> Result<Vec<Row>, DocError> {
        let end = self.walker.depth() - 1;
        let mut rows = Vec::new();
        while self.walker.depth() > end {
            let Some(node) = self.walker.next()? else {
                break;
            };
            let XmlNode::Open(start) = node else { continue };
            match local(&start).as_slice() {
                b"tr" => rows.push(Row {
                    header: false,
                    cells: Vec::new(),
                }),
                b"tblHeader" => {
                    if let Some(row) = rows.last_mut() {
                        row.header = attr(&start, "val").is_none_or(|v| v != "0" && v != "false");
                    }
                }
                b"tc" => {
                    let cell = self.cell()?;
                    if let Some(row) = rows.last_mut() {
                        row.cells.push(cell);
                    }
                }
                b"tblPr" | b"tblGrid" => self.walker.skip_element()?,
                _ => {}
            }
        }
        Ok(rows)
    }

    fn cell(&mut self) -> Result<Cell, DocError> {
        let end = self.walker.depth() - 1;
        let mut cell = Cell {
            span: 1,
            blocks: Vec::new(),
        };
        while self.walker.depth() > end {
            let Some(node) = self.walker.next()? else {
                break;
            };
            let XmlNode::Open(start) = node else { continue };
            match local(&start).as_slice() {
                b"gridSpan" => {
                    cell.span = attr(&start, "val")
                        .and_then(|v| v.parse().ok())
                        .filter(|n| (1..=1000).contains(n))
                        .unwrap_or(1);
                }
                b"p" => cell.blocks.push(Block::Paragraph(self.paragraph()?)),
                b"tbl" => cell.blocks.push(Block::Table(self.table()?)),
                _ => {}
            }
        }
        Ok(cell)
    }

    fn paragraph(&mut self) -> Result<Paragraph, DocError> {
        let end = self.walker.depth() - 1;
        let mut p = Paragraph {
            heading: None,
            list: None,
            html: String::new(),
            text: String::new(),
        };
        let (mut num_id, mut level): (Option<String>, u8) = (None, 0);
        let mut style_list: Option<(String, u8)> = None;
        let mut format = Format::default();
        let mut open = Format::default();
        let mut in_run_properties = false;
        let mut alt = String::new();
        let mut links_open = 0usize;
        while self.walker.depth() > end {
            let Some(node) = self.walker.next()? else {
                break;
            };
            let start = match node {
                XmlNode::Open(start) => start,
                XmlNode::Close(name) => {
                    match name.as_slice() {
                        b"rPr" => in_run_properties = false,
                        b"hyperlink" if links_open > 0 => {
                            close_format(&mut p.html, &mut open);
                            p.html.push_str("</a>");
                            links_open -= 1;
                        }
                        _ => {}
                    }
                    continue;
                }
                XmlNode::Text(_) => continue,
            };
            match local(&start).as_slice() {
                b"pStyle" => {
                    let id = attr(&start, "val").unwrap_or_default();
                    p.heading = self
                        .styles
                        .headings
                        .get(&id)
                        .copied()
                        .or_else(|| heading_level(&id));
                    style_list = self.styles.numbering.get(&id).cloned();
                }
                b"ilvl" => {
                    level = attr(&start, "val")
                        .and_then(|v| v.parse().ok())
                        .unwrap_or(0)
                        .min(8)
                }
                b"numId" => num_id = attr(&start, "val").filter(|v| v != "0"),
                b"r" => format = Format::default(),
                b"rPr" => in_run_properties = true,
                b"b" if in_run_properties => format.bold = on(&start),
                b"i" if in_run_properties => format.italic = on(&start),
                b"strike" | b"dstrike" if in_run_properties => format.strike = on(&start),
                b"vertAlign" if in_run_properties => {
                    let v = attr(&start, "val").unwrap_or_default();
                    format.sup = v == "superscript";
                    format.sub = v == "subscript";
                }
                b"t" => {
                    let text = self.walker.element_text()?;
                    self.budget.charge(text.len() * 2)?;
                    if open != format {
                        close_format(&mut p.html, &mut open);
                        for tag in format.tags() {
                            p.html.push_str(&format!("<{tag}>"));
                        }
                        open = format;
                    }
                    p.html.push_str(&xml_text(&text));
                    p.text.push_str(&text);
                }
                b"tab" if !in_run_properties => {
                    p.text.push('\t');
                    p.html.push('\t');
                }
                b"br" | b"cr" if attr(&start, "type").is_none_or(|t| t == "textWrapping") => {
                    p.text.push('\n');
                    p.html.push_str("<br />");
                }
                b"hyperlink" => {
                    let href = attr(&start, "id")
                        .and_then(|id| self.rels.get(&id))
                        .map(|(_, target, _)| target.clone())
                        .or_else(|| attr(&start, "anchor").map(|a| format!("#{a}")));
                    if let Some(href) = href {
                        close_format(&mut p.html, &mut open);
                        p.html.push_str("<a href=\"");
                        p.html.push_str(&xml_text(&href));
                        p.html.push_str("\">");
                        links_open += 1;
                    }
                }
                b"docPr" => alt = attr(&start, "descr").unwrap_or_default(),
                b"blip" | b"imagedata" => {
                    let id = attr(&start, "embed").or_else(|| attr(&start, "id"));
                    if self.images
                        && let Some(id) = id
                    {
                        self.image(&id, &alt, &mut p.html, &mut open)?;
                    }
                }
                b"del" | b"moveFrom" | b"instrText" | b"delText" | b"txbxContent"
                | b"footnoteReference" | b"endnoteReference" | b"commentReference" => {
                    self.walker.skip_element()?
                }
                _ => {}
            }
        }
        close_format(&mut p.html, &mut open);
        for _ in 0..links_open {
            p.html.push_str("</a>");
        }
        // Numbering on the paragraph wins over its style's.
        p.list = match num_id {
            Some(num_id) => Some((num_id, level)),
            None => style_list,
        };
        Ok(p)
    }

    fn image(
        &mut self,
        id: &str,
        alt: &str,
        html: &mut String,
        open: &mut Format,
    ) -> Result<(), DocError> {
        let Some((_, target, false)) = self.rels.get(id) else {
            return Ok(());
        };
        let target = target.clone();
        let Some(data) = self
            .archive
            .read(&target)
            .map_err(|e| DocError::archive(e, "a .docx"))?
        else {
            return Ok(());
        };
        self.budget.charge(data.len() * 4 / 3 + 64)?;
        close_format(html, open);
        html.push_str("<img");
        if !alt.is_empty() {
            html.push_str(" alt=\"");
            html.push_str(&xml_text(alt));
            html.push('"');
        }
        html.push_str(" src=\"data:");
        html.push_str(image_media_type(&data, &target));
        html.push_str(";base64,");
        html.push_str(&base64(&data));
        html.push_str("\" />");
        Ok(())
    }
}

/// Whether a toggle property (`<w:b/>`, `<w:b w:val="0"/>`) is on.
fn on(start: &quick_xml::events::BytesStart<'_>) -> bool {
    attr(start, "val").is_none_or(|v| !matches!(v.as_str(), "0" | "false" | "none"))
}

fn close_format(html: &mut String, open: &mut Format) {
    for tag in open.tags().iter().rev() {
        html.push_str(&format!("</{tag}>"));
    }
    *open = Format::default();
}

fn render_blocks(
    blocks: &[Block],
    numbering: &HashMap<String, HashMap<u8, bool>>,
    out: &mut String,
    budget: &mut TextBudget,
) -> Result<(), DocError> {
    // Open lists: (tag, level), innermost last.
    let mut lists: Vec<(&'static str, u8)> = Vec::new();
    let close_lists = |lists: &mut Vec<(&'static str, u8)>, out: &mut String, to: usize| {
        while lists.len() > to {
            if let Some((tag, _)) = lists.pop() {
                out.push_str(&format!("</li></{tag}>"));
            }
        }
    };
    for block in blocks {
        let before = out.len();
        match block {
            Block::Paragraph(p) if p.list.is_some() && p.heading.is_none() => {
                let Some((num_id, level)) = &p.list else {
                    continue;
                };
                let ordered = numbering
                    .get(num_id)
                    .and_then(|levels| levels.get(level))
                    .copied()
                    .unwrap_or(false);
                let tag = if ordered { "ol" } else { "ul" };
                // Close deeper lists, then continue or open at this level.
                while lists.last().is_some_and(|(_, l)| *l > *level) {
                    let outer = lists.len() - 1;
                    close_lists(&mut lists, out, outer);
                }
                match lists.last() {
                    Some((open_tag, l)) if *l == *level && *open_tag == tag => {
                        out.push_str("</li><li>")
                    }
                    Some((_, l)) if *l == *level => {
                        let outer = lists.len() - 1;
                        close_lists(&mut lists, out, outer);
                        out.push_str(&format!("<{tag}><li>"));
                        lists.push((tag, *level));
                    }
                    _ => {
                        out.push_str(&format!("<{tag}><li>"));
                        lists.push((tag, *level));
                    }
                }
                out.push_str(&p.html);
            }
            Block::Paragraph(p) => {
                close_lists(&mut lists, out, 0);
                if p.html.is_empty() {
                    continue;
                }
                let tag = match p.heading {
                    Some(level) => format!("h{level}"),
                    None => "p".into(),
                };
                out.push_str(&format!("<{tag}>{}</{tag}>", p.html));
            }
            Block::Table(rows) => {
                close_lists(&mut lists, out, 0);
                out.push_str("<table>");
                let header_rows = rows.iter().take_while(|r| r.header).count();
                for (i, row) in rows.iter().enumerate() {
                    if i == 0 && header_rows > 0 {
                        out.push_str("<thead>");
                    }
                    if i == header_rows && header_rows > 0 {
                        out.push_str("<tbody>");
                    }
                    out.push_str("<tr>");
                    let tag = if i < header_rows { "th" } else { "td" };
                    for cell in &row.cells {
                        if cell.span > 1 {
                            out.push_str(&format!("<{tag} colspan=\"{}\">", cell.span));
                        } else {
                            out.push_str(&format!("<{tag}>"));
                        }
                        render_blocks(&cell.blocks, numbering, out, budget)?;
                        out.push_str(&format!("</{tag}>"));
                    }
                    out.push_str("</tr>");
                    if i + 1 == header_rows {
                        out.push_str("</thead>");
                    }
                }
                if header_rows > 0 && header_rows < rows.len() {
                    out.push_str("</tbody>");
                }
                out.push_str("</table>");
            }
        }
        budget.charge(out.len() - before)?;
    }
    close_lists(&mut lists, out, 0);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::documents::docx;
    use crate::documents::tests::{bytes, mutants, obj, png, s, text_of, zip_of};

    pub(crate) fn sample() -> Vec<u8> {
        let spec = obj(&[
            (
                "properties",
                obj(&[("title", s("Report")), ("author", s("Ada"))]),
            ),
            (
                "elements",
                Value::Array(vec![
                    obj(&[
                        ("type", s("heading")),
                        ("text", s("Quarterly report")),
                        ("level", Value::Number(1.0)),
                    ]),
                    obj(&[("type", s("paragraph")), ("text", s("Plain & <simple>"))]),
                    obj(&[
                        ("type", s("paragraph")),
                        (
                            "runs",
                            Value::Array(vec![
                                obj(&[("text", s("Bold")), ("bold", Value::Bool(true))]),
                                s(" and "),
                                obj(&[("text", s("italic")), ("italic", Value::Bool(true))]),
                                s(", a "),
                                obj(&[
                                    ("text", s("link")),
                                    ("link", s("https://example.com/?a=1&b=2")),
                                ]),
                            ]),
                        ),
                    ]),
                    obj(&[
                        ("type", s("heading")),
                        ("text", s("Lists")),
                        ("level", Value::Number(2.0)),
                    ]),
                    obj(&[
                        ("type", s("list")),
                        ("items", Value::Array(vec![s("one"), s("two")])),
                    ]),
                    obj(&[
                        ("type", s("list")),
                        ("ordered", Value::Bool(true)),
                        (
                            "items",
                            Value::Array(vec![
                                s("first"),
                                obj(&[("text", s("nested")), ("level", Value::Number(1.0))]),
                                s("second"),
                            ]),
                        ),
                    ]),
                    obj(&[
                        ("type", s("table")),
                        ("header", Value::Bool(true)),
                        (
                            "rows",
                            Value::Array(vec![
                                Value::Array(vec![s("name"), s("score")]),
                                Value::Array(vec![s("ada"), Value::Number(3.0)]),
                            ]),
                        ),
                    ]),
                    obj(&[("type", s("image")), ("data", Value::Bytes(png(2, 1, 255)))]),
                    obj(&[("type", s("pageBreak"))]),
                    obj(&[
                        ("type", s("paragraph")),
                        ("text", s("line one\nline two")),
                        ("alignment", s("CENTER")),
                    ]),
                ]),
            ),
        ]);
        match docx::build(&[spec]) {
            Ok(Value::Bytes(b)) => b,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn docx_build_then_raw_text() {
        let file = sample();
        assert_eq!(&file[..2], b"PK");
        assert_eq!(sample(), file, "equal descriptions give equal bytes");
        assert_eq!(
            text_of(extract_raw_text(&[bytes(file)])),
            "Quarterly report\n\nPlain & <simple>\n\nBold and italic, a link\n\nLists\n\none\n\ntwo\n\nfirst\n\nnested\n\nsecond\n\nname\n\nscore\n\nada\n\n3\n\n\n\n\n\n\n\nline one\nline two\n\n"
        );
    }

    #[test]
    fn docx_build_then_html() {
        let html = text_of(convert_to_html(&[bytes(sample())]));
        let expected_start = "<h1>Quarterly report</h1><p>Plain &amp; &lt;simple&gt;</p><p><strong>Bold</strong> and <em>italic</em>, a <a href=\"https://example.com/?a=1&amp;b=2\">link</a></p><h2>Lists</h2><ul><li>one</li><li>two</li></ul><ol><li>first<ol><li>nested</li></ol></li><li>second</li></ol><table><thead><tr><th><p><strong>name</strong></p></th><th><p><strong>score</strong></p></th></tr></thead><tbody><tr><td><p>ada</p></td><td><p>3</p></td></tr></tbody></table><p><img src=\"data:image/png;base64,";
        assert!(html.starts_with(expected_start), "{html}");
        assert!(
            html.ends_with("\" /></p><p>line one<br />line two</p>"),
            "{html}"
        );
    }

    #[test]
    fn a_title_stays_a_paragraph_as_in_mammoth() {
        assert_eq!(heading_level("Title"), None);
        assert_eq!(heading_level("heading 3"), Some(3));
        assert_eq!(heading_level("Heading6"), Some(6));
        assert_eq!(heading_level("heading 9"), None);
    }

    #[test]
    fn a_document_whose_escaped_text_passes_the_cap_is_refused_while_written() {
        // 14 MiB of '&' is 70 MiB of "&amp;": refused before the package is zipped.
        let text = "&".repeat(14 << 20);
        let spec = obj(&[(
            "elements",
            Value::Array(vec![obj(&[
                ("type", s("paragraph")),
                ("text", Value::String(text)),
            ])]),
        )]);
        assert_eq!(
            docx::build(&[spec])
                .err()
                .map(HostError::into_message)
                .as_deref(),
            Some(
                "docx.build: the document would be larger than the 67108864 bytes one call may return"
            )
        );
    }

    #[test]
    fn docx_build_argument_errors() {
        let e = |spec: Value| {
            docx::build(&[spec])
                .err()
                .map(HostError::into_message)
                .unwrap_or_default()
        };
        assert_eq!(
            e(obj(&[("elements", Value::Array(vec![Value::Number(1.0)]))])),
            "docx.build: elements[0] is missing a \"type\""
        );
        assert_eq!(
            e(obj(&[(
                "elements",
                Value::Array(vec![obj(&[("type", s("video"))])])
            )])),
            "docx.build: elements[0] has unknown type \"video\""
        );
        assert!(
            e(obj(&[(
                "elements",
                Value::Array(vec![obj(&[("type", s("image")), ("data", s("x"))])])
            )]))
            .starts_with("docx.build: elements[0]: data must be a Uint8Array"),
        );
        let many = Value::Array(vec![
            obj(&[("type", s("pageBreak"))]);
            docx::MAX_ELEMENTS + 1
        ]);
        assert_eq!(
            e(obj(&[("elements", many)])),
            "docx.build: 100001 elements exceeds the 100000 element limit"
        );
        let row = Value::Array(vec![s("x"); 1000]);
        let rows = Value::Array(vec![row; 251]);
        assert_eq!(
            e(obj(&[(
                "elements",
                Value::Array(vec![obj(&[("type", s("table")), ("rows", rows)])])
            )])),
            "docx.build: elements[0] brings the document past the 250000 table cell limit"
        );
        // No elements is an empty document, as in the reference.
        assert!(docx::build(&[Value::Undefined]).is_ok());
    }

    #[test]
    fn hostile_docx_files() {
        let e = |b: Vec<u8>| {
            extract_raw_text(&[bytes(b)])
                .err()
                .map(HostError::into_message)
                .unwrap_or_default()
        };
        assert!(e(b"not a zip".to_vec()).starts_with(
            "mammoth.extractRawText: the bytes are not a .docx file (not a ZIP archive"
        ));
        assert_eq!(
            e(zip_of(&[("hello.txt", b"hi")])),
            "mammoth.extractRawText: the bytes are not a .docx file (it has no word/document.xml)"
        );
        // A document part nested past the depth cap.
        let deep = format!(
            "<w:document xmlns:w=\"w\"><w:body>{}</w:body></w:document>",
            "<w:sdt>".repeat(300)
        );
        assert!(
            e(zip_of(&[("word/document.xml", deep.as_bytes())]))
                .contains("nests elements more than 256 deep")
        );
        // Entity expansion is refused with the DTD.
        let laughs = "<!DOCTYPE d [<!ENTITY a \"aaaaaaaaaa\"><!ENTITY b \"&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;\">]><w:document xmlns:w=\"w\"><w:body><w:p><w:r><w:t>&b;</w:t></w:r></w:p></w:body></w:document>";
        assert!(
            e(zip_of(&[("word/document.xml", laughs.as_bytes())])).contains("DTDs are refused")
        );
        // A bomb: 200 MiB of zeros compressed into one part.
        let bomb = {
            use ::zip::write::SimpleFileOptions;
            use std::io::Write;
            let mut w = ::zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
            let options =
                SimpleFileOptions::default().compression_method(::zip::CompressionMethod::Deflated);
            w.start_file("word/document.xml", options)
                .unwrap_or_else(|e| panic!("{e}"));
            let chunk = vec![b' '; 1 << 20];
            for _ in 0..200 {
                w.write_all(&chunk).unwrap_or_else(|e| panic!("{e}"));
            }
            w.finish().unwrap_or_else(|e| panic!("{e}")).into_inner()
        };
        assert_eq!(
            e(bomb),
            "mammoth.extractRawText: the archive inflates past the 104857600 byte limit"
        );
    }

    #[test]
    fn mutated_docx_files_never_panic() {
        let real = sample();
        for m in mutants(&real, 0x1234_5678, 200) {
            let r = std::panic::catch_unwind(|| {
                let _ = extract_raw_text(&[bytes(m.clone())]);
                let _ = convert_to_html(&[bytes(m.clone())]);
            });
            assert!(r.is_ok(), "a mutated .docx panicked the reader");
        }
    }
}
