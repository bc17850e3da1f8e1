//! `epub`: an EPUB 2 or 3 book's metadata, table of contents and text, from its container,
//! package document (OPF), NCX or navigation document and XHTML chapters (zip + quick-xml).
//!
//! The reference ran epub2 on the host, which reads a path, so it staged the guest's bytes in a
//! temporary file; this module reads the bytes where they are and never touches a filesystem.
//! The shapes are epub2's: metadata `{title, creator, creatorFileAs, publisher, language,
//! subject: [...], description, date, ISBN, UUID, cover, ...}` (only what the book declares),
//! table of contents `[{id, title, href, order}]`, chapters `[{id, title, href, text}]` in spine
//! order, and `extractText(bytes, {chapterSeparator = "\n\n"})`. Beyond it:
//! - EPUB 3 navigation documents are read too (epub2 reads only the NCX), and every entry has
//!   its nesting `level` (1 for the top);
//! - chapter text keeps its paragraphs: each block (paragraph, heading, list item, table row,
//!   `<br>`) is its own line, where the reference ran the whole chapter into one line; scripts
//!   and styles are left out, as there;
//! - a chapter that is not well-formed XML is still read, by its tags stripped.
//!
//! Bounds: [`MAX_EPUB_ENTRIES`] entries, [`MAX_EPUB_INFLATED_BYTES`] inflated in all,
//! [`MAX_CHAPTERS`] spine items, the XML depth cap, and the text budget of every document call.

use std::collections::HashMap;

use nodetool_protocol::value::Value;

use super::{
    DocError, TextBudget, XmlNode, XmlWalker, attr, check_deadline, folder_of, local, resolve_part,
};
use crate::archive::{ArchiveLimits, SafeArchive};
use crate::error::HostError;
use crate::limits::{option, options_of, require_bytes};

/// Entries an EPUB may hold.
pub const MAX_EPUB_ENTRIES: usize = 10_000;
/// Bytes one call may inflate from an EPUB, every part read together.
pub const MAX_EPUB_INFLATED_BYTES: u64 = 100 * 1024 * 1024;
/// Spine items (chapters) one book may have.
pub const MAX_CHAPTERS: usize = 10_000;

/// `metadata(bytes)` -> the package document's metadata.
pub fn metadata(args: &[Value]) -> Result<Value, HostError> {
    const AT: &str = "epub.metadata";
    let bytes = require_bytes(AT, args.first(), "bytes")?;
    let book = open(bytes).map_err(|e| e.at(AT))?;
    Ok(Value::Object(book.metadata))
}

/// `tableOfContents(bytes)` -> `[{id, title, href, order, level}]` in reading order.
pub fn table_of_contents(args: &[Value]) -> Result<Value, HostError> {
    const AT: &str = "epub.tableOfContents";
    let bytes = require_bytes(AT, args.first(), "bytes")?;
    let mut book = open(bytes).map_err(|e| e.at(AT))?;
    let toc = book.toc().map_err(|e| e.at(AT))?;
    Ok(Value::Array(
        toc.into_iter()
            .map(|e| {
                Value::Object(vec![
                    ("id".into(), Value::String(e.id)),
                    ("title".into(), Value::String(e.title)),
                    ("href".into(), Value::String(e.href)),
                    ("order".into(), Value::Number(e.order as f64)),
                    ("level".into(), Value::Number(e.level as f64)),
                ])
            })
            .collect(),
    ))
}

/// `extractText(bytes, {chapterSeparator})` -> every chapter's text, non-empty ones joined.
pub fn extract_text(args: &[Value]) -> Result<Value, HostError> {
    const AT: &str = "epub.extractText";
    let bytes = require_bytes(AT, args.first(), "bytes")?;
    let separator = match option(options_of(args.get(1)), "chapterSeparator") {
        Some(Value::String(s)) => s.clone(),
        _ => "\n\n".into(),
    };
    let mut book = open(bytes).map_err(|e| e.at(AT))?;
    let chapters = book.chapters().map_err(|e| e.at(AT))?;
    let texts: Vec<&str> = chapters
        .iter()
        .map(|c| c.text.as_str())
        .filter(|t| !t.is_empty())
        .collect();
    let mut budget = TextBudget::standard();
    budget
        .charge(separator.len().saturating_mul(texts.len()))
        .map_err(|e| e.at(AT))?;
    Ok(Value::String(texts.join(&separator)))
}

/// `extractChapters(bytes)` -> `[{id, title, href, text}]` in spine order.
pub fn extract_chapters(args: &[Value]) -> Result<Value, HostError> {
    const AT: &str = "epub.extractChapters";
    let bytes = require_bytes(AT, args.first(), "bytes")?;
    let mut book = open(bytes).map_err(|e| e.at(AT))?;
    let chapters = book.chapters().map_err(|e| e.at(AT))?;
    Ok(Value::Array(
        chapters
            .into_iter()
            .map(|c| {
                Value::Object(vec![
                    ("id".into(), Value::String(c.id)),
                    ("title".into(), Value::String(c.title)),
                    ("href".into(), Value::String(c.href)),
                    ("text".into(), Value::String(c.text)),
                ])
            })
            .collect(),
    ))
}

/// One table-of-contents entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TocEntry {
    pub id: String,
    pub title: String,
    pub href: String,
    pub order: usize,
    pub level: usize,
}

/// One chapter (spine item) with its text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chapter {
    pub id: String,
    pub title: String,
    pub href: String,
    pub text: String,
}

struct ManifestItem {
    href: String,
    media_type: String,
    properties: String,
}

/// An opened book: its archive, package document and what it lists.
pub struct Book<'a> {
    archive: SafeArchive<'a>,
    metadata: Vec<(String, Value)>,
    manifest: HashMap<String, ManifestItem>,
    /// Spine idrefs, in order.
    spine: Vec<String>,
    /// The NCX's manifest id (the spine's `toc`).
    ncx: Option<String>,
}

fn not_epub(reason: &str) -> DocError {
    DocError::NotDocument(format!("the bytes are not an EPUB file ({reason})"))
}

/// Opens a book: the container, then its package document.
pub fn open(bytes: &[u8]) -> Result<Book<'_>, DocError> {
    let limits = ArchiveLimits {
        max_entries: MAX_EPUB_ENTRIES,
        max_inflated: MAX_EPUB_INFLATED_BYTES,
    };
    let mut archive =
        SafeArchive::open(bytes, limits).map_err(|e| DocError::archive(e, "an EPUB"))?;
    let archive_error = |e| DocError::archive(e, "an EPUB");
    let container = "META-INF/container.xml";
    let Some(xml) = archive.read_text(container).map_err(archive_error)? else {
        return Err(not_epub("it has no META-INF/container.xml"));
    };
    let mut opf_path = None;
    let mut walker = XmlWalker::new(&xml, container, false);
    while let Some(node) = walker.next()? {
        if let XmlNode::Open(start) = node
            && local(&start) == b"rootfile"
            && let Some(path) = attr(&start, "full-path")
        {
            opf_path = Some(resolve_part("", &path));
            break;
        }
    }
    let Some(opf_path) = opf_path else {
        return Err(not_epub("its container names no package document"));
    };
    let Some(opf) = archive.read_text(&opf_path).map_err(archive_error)? else {
        return Err(not_epub("its package document is missing"));
    };
    let base = folder_of(&opf_path).to_string();
    let mut book = Book {
        archive,
        metadata: Vec::new(),
        manifest: HashMap::new(),
        spine: Vec::new(),
        ncx: None,
    };
    book.read_package(&opf, &opf_path, &base)?;
    Ok(book)
}

/// Sets `key` in an ordered object (the first value kept, as epub2 does for repeated fields).
fn set_first(members: &mut Vec<(String, Value)>, key: &str, value: String) {
    if !members.iter().any(|(k, _)| k == key) {
        members.push((key.to_string(), Value::String(value)));
    }
}

impl Book<'_> {
    fn read_package(&mut self, opf: &str, part: &str, base: &str) -> Result<(), DocError> {
        let mut walker = XmlWalker::new(opf, part, false);
        let mut in_metadata = false;
        let mut subjects = Vec::new();
        let mut cover_id: Option<String> = None;
        // EPUB 3 `<meta refines="#id" property="file-as">`: id -> file-as, and the creators' ids.
        let mut file_as: HashMap<String, String> = HashMap::new();
        let mut creator_id: Option<String> = None;
        while let Some(node) = walker.next()? {
            match node {
                XmlNode::Open(start) => {
                    let name = local(&start);
                    match name.as_slice() {
                        b"metadata" => in_metadata = true,
                        b"item" => {
                            if let (Some(id), Some(href)) =
                                (attr(&start, "id"), attr(&start, "href"))
                            {
                                let properties = attr(&start, "properties").unwrap_or_default();
                                if properties.split_whitespace().any(|p| p == "cover-image") {
                                    cover_id.get_or_insert(id.clone());
                                }
                                self.manifest.insert(
                                    id,
                                    ManifestItem {
                                        href: resolve_part(base, &href),
                                        media_type: attr(&start, "media-type").unwrap_or_default(),
                                        properties,
                                    },
                                );
                            }
                        }
                        b"spine" => self.ncx = attr(&start, "toc"),
                        b"itemref" => {
                            if let Some(idref) = attr(&start, "idref") {
                                self.spine.push(idref);
                                if self.spine.len() > MAX_CHAPTERS {
                                    return Err(DocError::TooLarge(format!(
                                        "the book has more than {MAX_CHAPTERS} chapters"
                                    )));
                                }
                            }
                        }
                        b"meta" if in_metadata => {
                            let meta_name = attr(&start, "name");
                            let content = attr(&start, "content");
                            if let (Some(n), Some(c)) = (&meta_name, &content) {
                                if n == "cover" {
                                    cover_id = Some(c.clone());
                                } else {
                                    set_first(&mut self.metadata, n, c.clone());
                                }
                            } else if attr(&start, "property").as_deref() == Some("file-as")
                                && let Some(target) = attr(&start, "refines")
                            {
                                let text = walker.element_text()?.trim().to_string();
                                file_as.insert(target.trim_start_matches('#').to_string(), text);
                            }
                        }
                        field
                            if in_metadata
                                && start.name().prefix().is_some_and(|p| p.as_ref() == b"dc") =>
                        {
                            let field = String::from_utf8_lossy(field).into_owned();
                            let scheme = attr(&start, "scheme").unwrap_or_default();
                            let role_file_as = attr(&start, "file-as");
                            let id = attr(&start, "id");
                            let text = walker.element_text()?.trim().to_string();
                            if text.is_empty() {
                                continue;
                            }
                            match field.as_str() {
                                "subject" => subjects.push(Value::String(text)),
                                "identifier" => {
                                    let lower = text.to_ascii_lowercase();
                                    if scheme.eq_ignore_ascii_case("isbn")
                                        || lower.starts_with("urn:isbn:")
                                    {
                                        let isbn = text
                                            .get(9..)
                                            .filter(|_| lower.starts_with("urn:isbn:"))
                                            .unwrap_or(&text);
                                        set_first(&mut self.metadata, "ISBN", isbn.to_string());
                                    } else if scheme.eq_ignore_ascii_case("uuid")
                                        || lower.starts_with("urn:uuid:")
                                    {
                                        let uuid = text
                                            .get(9..)
                                            .filter(|_| lower.starts_with("urn:uuid:"))
                                            .unwrap_or(&text);
                                        set_first(&mut self.metadata, "UUID", uuid.to_string());
                                    }
                                }
                                "creator" => {
                                    if let Some(f) = role_file_as {
                                        set_first(&mut self.metadata, "creatorFileAs", f);
                                    }
                                    if creator_id.is_none()
                                        && !self.metadata.iter().any(|(k, _)| k == "creator")
                                    {
                                        creator_id = id;
                                    }
                                    set_first(&mut self.metadata, "creator", text);
                                }
                                other => set_first(&mut self.metadata, other, text),
                            }
                        }
                        _ => {}
                    }
                }
                XmlNode::Close(name) if name == b"metadata" => in_metadata = false,
                _ => {}
            }
        }
        if let Some(f) = creator_id.and_then(|id| file_as.remove(&id)) {
            set_first(&mut self.metadata, "creatorFileAs", f);
        }
        if !subjects.is_empty() {
            self.metadata
                .push(("subject".into(), Value::Array(subjects)));
        }
        if let Some(cover) = cover_id {
            set_first(&mut self.metadata, "cover", cover);
        }
        Ok(())
    }

    /// The table of contents: the EPUB 3 navigation document when there is one, else the NCX.
    pub fn toc(&mut self) -> Result<Vec<TocEntry>, DocError> {
        let nav = self
            .manifest
            .values()
            .find(|i| i.properties.split_whitespace().any(|p| p == "nav"))
            .map(|i| i.href.clone());
        let ncx = self
            .ncx
            .as_ref()
            .and_then(|id| self.manifest.get(id))
            .or_else(|| {
                self.manifest
                    .values()
                    .find(|i| i.media_type == "application/x-dtbncx+xml")
            })
            .map(|i| i.href.clone());
        let mut entries = Vec::new();
        if let Some(ncx) = ncx
            && let Some(xml) = self
                .archive
                .read_text(&ncx)
                .map_err(|e| DocError::archive(e, "an EPUB"))?
        {
            entries = self.ncx_entries(&xml, &ncx)?;
        }
        if entries.is_empty()
            && let Some(nav) = nav
            && let Some(xml) = self
                .archive
                .read_text(&nav)
                .map_err(|e| DocError::archive(e, "an EPUB"))?
        {
            entries = self.nav_entries(&xml, &nav)?;
        }
        Ok(entries)
    }

    /// The manifest id of a part (fragment ignored), or `""`.
    fn id_of(&self, href: &str) -> String {
        let path = href.split('#').next().unwrap_or_default();
        self.manifest
            .iter()
            .find(|(_, i)| i.href == path)
            .map(|(id, _)| id.clone())
            .unwrap_or_default()
    }

    fn ncx_entries(&self, xml: &str, part: &str) -> Result<Vec<TocEntry>, DocError> {
        let base = folder_of(part);
        let mut walker = XmlWalker::new(xml, part, true);
        let mut entries: Vec<TocEntry> = Vec::new();
        // Open navPoints: index into entries.
        let mut open: Vec<usize> = Vec::new();
        let mut in_label = false;
        while let Some(node) = walker.next()? {
            match node {
                XmlNode::Open(start) => match local(&start).as_slice() {
                    b"navPoint" => {
                        let order = attr(&start, "playOrder")
                            .and_then(|o| o.parse().ok())
                            .unwrap_or(entries.len() + 1);
                        entries.push(TocEntry {
                            id: String::new(),
                            title: String::new(),
                            href: String::new(),
                            order,
                            level: open.len() + 1,
                        });
                        open.push(entries.len() - 1);
                    }
                    b"navLabel" => in_label = true,
                    b"text" if in_label => {
                        let text = walker.element_text()?;
                        if let Some(&i) = open.last() {
                            entries[i].title.push_str(text.trim());
                        }
                    }
                    b"content" => {
                        if let (Some(&i), Some(src)) = (open.last(), attr(&start, "src")) {
                            let fragment = src.split_once('#').map(|(_, f)| f.to_string());
                            let path = resolve_part(base, &src);
                            entries[i].id = self.id_of(&path);
                            entries[i].href = match fragment {
                                Some(f) => format!("{path}#{f}"),
                                None => path,
                            };
                        }
                    }
                    _ => {}
                },
                XmlNode::Close(name) => match name.as_slice() {
                    b"navPoint" => {
                        open.pop();
                    }
                    b"navLabel" => in_label = false,
                    _ => {}
                },
                XmlNode::Text(_) => {}
            }
        }
        Ok(entries)
    }

    fn nav_entries(&self, xml: &str, part: &str) -> Result<Vec<TocEntry>, DocError> {
        let base = folder_of(part);
        let mut walker = XmlWalker::new(xml, part, true);
        let mut entries = Vec::new();
        // The depth the toc <nav> opened at, and how many <ol> are open inside it.
        let mut toc_depth: Option<usize> = None;
        let mut lists = 0usize;
        while let Some(node) = walker.next()? {
            match node {
                XmlNode::Open(start) => match local(&start).as_slice() {
                    b"nav" if toc_depth.is_none() => {
                        let kind = attr(&start, "type").unwrap_or_default();
                        if kind.split_whitespace().any(|k| k == "toc") {
                            toc_depth = Some(walker.depth());
                        }
                    }
                    b"ol" if toc_depth.is_some() => lists += 1,
                    b"a" if toc_depth.is_some() => {
                        let href = attr(&start, "href").unwrap_or_default();
                        let title = collapse(&walker.element_text()?);
                        let fragment = href.split_once('#').map(|(_, f)| f.to_string());
                        let path = resolve_part(base, &href);
                        entries.push(TocEntry {
                            id: self.id_of(&path),
                            title,
                            href: match fragment {
                                Some(f) => format!("{path}#{f}"),
                                None => path,
                            },
                            order: entries.len() + 1,
                            level: lists.max(1),
                        });
                    }
                    _ => {}
                },
                XmlNode::Close(name) => match name.as_slice() {
                    b"ol" if toc_depth.is_some() => lists = lists.saturating_sub(1),
                    b"nav" if toc_depth.is_some_and(|d| walker.depth() < d) => break,
                    _ => {}
                },
                XmlNode::Text(_) => {}
            }
        }
        Ok(entries)
    }

    /// Every spine item with its text and its table-of-contents title.
    pub fn chapters(&mut self) -> Result<Vec<Chapter>, DocError> {
        let toc = self.toc()?;
        let mut title_of: HashMap<String, String> = HashMap::new();
        for entry in toc {
            if !entry.id.is_empty() && !entry.title.is_empty() {
                title_of.entry(entry.id).or_insert(entry.title);
            }
        }
        let mut budget = TextBudget::standard();
        let mut chapters = Vec::new();
        for idref in self.spine.clone() {
            check_deadline()?;
            let Some(item) = self.manifest.get(&idref) else {
                continue;
            };
            let href = item.href.clone();
            let Some(xhtml) = self
                .archive
                .read_text(&href)
                .map_err(|e| DocError::archive(e, "an EPUB"))?
            else {
                continue;
            };
            let text = chapter_text(&xhtml, &href)?;
            budget.charge(text.len())?;
            chapters.push(Chapter {
                title: title_of.get(&idref).cloned().unwrap_or_default(),
                id: idref,
                href,
                text,
            });
        }
        Ok(chapters)
    }
}

/// Whitespace runs to one space, trimmed.
fn collapse(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Block elements: each starts a new line of the chapter's text.
fn is_block(name: &[u8]) -> bool {
    matches!(
        name,
        b"p" | b"div"
            | b"h1"
            | b"h2"
            | b"h3"
            | b"h4"
            | b"h5"
            | b"h6"
            | b"li"
            | b"tr"
            | b"br"
            | b"blockquote"
            | b"pre"
            | b"section"
            | b"article"
            | b"header"
            | b"footer"
            | b"dt"
            | b"dd"
            | b"figcaption"
            | b"hr"
            | b"table"
            | b"ul"
            | b"ol"
    )
}

/// A chapter's text: one line per block, whitespace inside a line collapsed, scripts and styles
/// left out. A chapter that is not well-formed XML has its tags stripped instead.
pub fn chapter_text(xhtml: &str, part: &str) -> Result<String, DocError> {
    match xml_chapter_text(xhtml, part) {
        Ok(text) => Ok(text),
        Err(DocError::Malformed(_)) => Ok(stripped_text(xhtml)),
        Err(e) => Err(e),
    }
}

fn xml_chapter_text(xhtml: &str, part: &str) -> Result<String, DocError> {
    let mut walker = XmlWalker::new(xhtml, part, true);
    let mut lines: Vec<String> = Vec::new();
    let mut line = String::new();
    let mut in_body = false;
    let flush = |line: &mut String, lines: &mut Vec<String>| {
        let text = collapse(line);
        if !text.is_empty() {
            lines.push(text);
        }
        line.clear();
    };
    while let Some(node) = walker.next()? {
        match node {
            XmlNode::Open(start) => {
                let name = local(&start);
                match name.as_slice() {
                    b"body" => in_body = true,
                    b"script" | b"style" | b"head" => walker.skip_element()?,
                    n if is_block(n) => flush(&mut line, &mut lines),
                    b"td" | b"th" => line.push(' '),
                    _ => {}
                }
            }
            XmlNode::Close(name) if is_block(&name) => flush(&mut line, &mut lines),
            XmlNode::Close(_) => {}
            XmlNode::Text(t) if in_body => line.push_str(&t),
            XmlNode::Text(_) => {}
        }
    }
    flush(&mut line, &mut lines);
    Ok(lines.join("\n"))
}

/// The text of markup that does not parse: tags removed (scripts and styles with their
/// content), the common entities resolved, one line per block tag.
fn stripped_text(markup: &str) -> String {
    let lower = markup.to_ascii_lowercase();
    let mut out = String::with_capacity(markup.len() / 2);
    let mut i = 0;
    while i < markup.len() {
        let Some(rel) = markup[i..].find('<') else {
            out.push_str(&markup[i..]);
            break;
        };
        out.push_str(&markup[i..i + rel]);
        let tag_start = i + rel;
        let Some(close) = markup[tag_start..].find('>') else {
            break;
        };
        let tag = &lower[tag_start + 1..tag_start + close];
        let name: String = tag
            .trim_start_matches('/')
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric())
            .collect();
        i = tag_start + close + 1;
        if (name == "script" || name == "style") && !tag.starts_with('/') {
            let end = format!("</{name}");
            i = lower[i..].find(&end).map_or(markup.len(), |e| i + e);
            continue;
        }
        out.push(if is_block(name.as_bytes()) { '\n' } else { ' ' });
    }
    let decoded =
        quick_xml::escape::unescape(&out).map_or_else(|_| out.clone(), |c| c.into_owned());
    decoded
        .lines()
        .map(collapse)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::documents::tests::{bytes, mutants, s, text_of, zip_of};

    const CONTAINER: &[u8] = br#"<?xml version="1.0"?><container version="1.0" xmlns="urn:oasis:names:tc:opendocument:xmlns:container"><rootfiles><rootfile full-path="OEBPS/content.opf" media-type="application/oebps-package+xml"/></rootfiles></container>"#;

    fn opf(nav: bool) -> String {
        let nav_item = if nav {
            r#"<item id="nav" href="nav.xhtml" media-type="application/xhtml+xml" properties="nav"/>"#
        } else {
            ""
        };
        format!(
            r##"<?xml version="1.0" encoding="UTF-8"?>
<package xmlns="http://www.idpf.org/2007/opf" version="3.0" unique-identifier="id">
  <metadata xmlns:dc="http://purl.org/dc/elements/1.1/" xmlns:opf="http://www.idpf.org/2007/opf">
    <dc:identifier id="id">urn:uuid:12345678-1234-1234-1234-123456789abc</dc:identifier>
    <dc:identifier opf:scheme="ISBN">978-3-16-148410-0</dc:identifier>
    <dc:title>A &amp; B</dc:title>
    <dc:creator id="c1">Ada Lovelace</dc:creator>
    <meta refines="#c1" property="file-as">Lovelace, Ada</meta>
    <dc:language>en</dc:language>
    <dc:subject>Math</dc:subject>
    <dc:subject>Engines</dc:subject>
    <dc:publisher>NodeTool Press</dc:publisher>
    <dc:date>1843-01-01</dc:date>
    <meta name="cover" content="cover-img"/>
  </metadata>
  <manifest>
    {nav_item}
    <item id="ncx" href="toc.ncx" media-type="application/x-dtbncx+xml"/>
    <item id="ch1" href="text/ch1.xhtml" media-type="application/xhtml+xml"/>
    <item id="ch2" href="text/ch%202.xhtml" media-type="application/xhtml+xml"/>
    <item id="cover-img" href="cover.png" media-type="image/png"/>
  </manifest>
  <spine toc="ncx"><itemref idref="ch1"/><itemref idref="ch2"/></spine>
</package>"##
        )
    }

    const NCX: &[u8] = br#"<?xml version="1.0"?><!DOCTYPE ncx PUBLIC "-//NISO//DTD ncx 2005-1//EN" "http://www.daisy.org/z3986/2005/ncx-2005-1.dtd"><ncx xmlns="http://www.daisy.org/z3986/2005/ncx/"><navMap>
<navPoint id="p1" playOrder="1"><navLabel><text>Chapter One</text></navLabel><content src="text/ch1.xhtml"/>
  <navPoint id="p1a" playOrder="2"><navLabel><text>A section</text></navLabel><content src="text/ch1.xhtml#s"/></navPoint>
</navPoint>
<navPoint id="p2" playOrder="3"><navLabel><text>Chapter Two</text></navLabel><content src="text/ch%202.xhtml"/></navPoint>
</navMap></ncx>"#;

    const CH1: &[u8] = br#"<?xml version="1.0" encoding="utf-8"?><!DOCTYPE html><html xmlns="http://www.w3.org/1999/xhtml"><head><title>One</title><style>p { color: red }</style></head><body><h1>Chapter   One</h1><p>It was a <em>dark</em>&nbsp;night &amp; stormy.</p><script>var x = "<p>no</p>";</script><p id="s">Second<br/>line</p></body></html>"#;
    const CH2: &[u8] = b"<html><body><p>Broken <b>markup &amp; more<p>next block</body>";

    pub(crate) fn sample(nav: bool) -> Vec<u8> {
        let opf = opf(nav);
        let nav_doc = br#"<html xmlns="http://www.w3.org/1999/xhtml" xmlns:epub="http://www.idpf.org/2007/ops"><body><nav epub:type="toc"><ol><li><a href="text/ch1.xhtml">One (nav)</a><ol><li><a href="text/ch1.xhtml#s">Sub</a></li></ol></li><li><a href="text/ch%202.xhtml">Two (nav)</a></li></ol></nav><nav epub:type="landmarks"><ol><li><a href="x.xhtml">not toc</a></li></ol></nav></body></html>"#;
        let mut entries: Vec<(&str, &[u8])> = vec![
            ("mimetype", b"application/epub+zip"),
            ("META-INF/container.xml", CONTAINER),
            ("OEBPS/content.opf", opf.as_bytes()),
            ("OEBPS/text/ch1.xhtml", CH1),
            ("OEBPS/text/ch 2.xhtml", CH2),
        ];
        if nav {
            entries.push(("OEBPS/nav.xhtml", nav_doc));
        } else {
            entries.push(("OEBPS/toc.ncx", NCX));
        }
        zip_of(&entries)
    }

    #[test]
    fn metadata_like_epub2() {
        assert_eq!(
            metadata(&[bytes(sample(false))]),
            Ok(Value::Object(vec![
                ("UUID".into(), s("12345678-1234-1234-1234-123456789abc")),
                ("ISBN".into(), s("978-3-16-148410-0")),
                ("title".into(), s("A & B")),
                ("creator".into(), s("Ada Lovelace")),
                ("language".into(), s("en")),
                ("publisher".into(), s("NodeTool Press")),
                ("date".into(), s("1843-01-01")),
                ("creatorFileAs".into(), s("Lovelace, Ada")),
                (
                    "subject".into(),
                    Value::Array(vec![s("Math"), s("Engines")])
                ),
                ("cover".into(), s("cover-img")),
            ]))
        );
    }

    #[test]
    fn table_of_contents_from_ncx_and_nav() {
        let ncx_book = sample(false);
        let mut book = open(&ncx_book).unwrap_or_else(|e| panic!("{e:?}"));
        let toc = book.toc().unwrap_or_else(|e| panic!("{e:?}"));
        let rows: Vec<(&str, &str, &str, usize, usize)> = toc
            .iter()
            .map(|e| {
                (
                    e.id.as_str(),
                    e.title.as_str(),
                    e.href.as_str(),
                    e.order,
                    e.level,
                )
            })
            .collect();
        assert_eq!(
            rows,
            [
                ("ch1", "Chapter One", "OEBPS/text/ch1.xhtml", 1, 1),
                ("ch1", "A section", "OEBPS/text/ch1.xhtml#s", 2, 2),
                ("ch2", "Chapter Two", "OEBPS/text/ch 2.xhtml", 3, 1),
            ]
        );
        let nav_book = sample(true);
        let mut book = open(&nav_book).unwrap_or_else(|e| panic!("{e:?}"));
        let titles: Vec<(String, usize)> = book
            .toc()
            .unwrap_or_else(|e| panic!("{e:?}"))
            .into_iter()
            .map(|e| (e.title, e.level))
            .collect();
        assert_eq!(
            titles,
            [
                ("One (nav)".into(), 1),
                ("Sub".into(), 2),
                ("Two (nav)".into(), 1)
            ]
        );
    }

    #[test]
    fn chapters_and_text() {
        let chapters = extract_chapters(&[bytes(sample(false))]);
        let Ok(Value::Array(chapters)) = chapters else {
            panic!("{chapters:?}")
        };
        assert_eq!(
            chapters[0],
            Value::Object(vec![
                ("id".into(), s("ch1")),
                ("title".into(), s("Chapter One")),
                ("href".into(), s("OEBPS/text/ch1.xhtml")),
                (
                    "text".into(),
                    s("Chapter One\nIt was a dark night & stormy.\nSecond\nline")
                ),
            ])
        );
        assert_eq!(
            text_of(extract_text(&[
                bytes(sample(false)),
                Value::Object(vec![("chapterSeparator".into(), s("\n---\n"))])
            ])),
            "Chapter One\nIt was a dark night & stormy.\nSecond\nline\n---\nBroken markup & more\nnext block"
        );
    }

    #[test]
    fn hostile_epubs() {
        let e = |b: Vec<u8>| {
            metadata(&[bytes(b)])
                .err()
                .map(HostError::into_message)
                .unwrap_or_default()
        };
        assert_eq!(
            e(zip_of(&[("mimetype", b"application/epub+zip")])),
            "epub.metadata: the bytes are not an EPUB file (it has no META-INF/container.xml)"
        );
        assert!(
            e(b"%PDF".to_vec())
                .starts_with("epub.metadata: the bytes are not an EPUB file (not a ZIP archive")
        );
        // An entity bomb in the package document is refused with its DTD.
        let laughs = br#"<!DOCTYPE p [<!ENTITY a "aaaaaaaaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;">]><package><metadata><dc:title xmlns:dc="dc">&b;</dc:title></metadata></package>"#;
        assert!(
            e(zip_of(&[
                ("META-INF/container.xml", CONTAINER),
                ("OEBPS/content.opf", laughs)
            ]))
            .contains("DTDs are refused")
        );
        // Too many chapters.
        let spine: String = (0..=MAX_CHAPTERS)
            .map(|_| "<itemref idref=\"a\"/>")
            .collect();
        let opf = format!("<package><spine>{spine}</spine></package>");
        assert_eq!(
            e(zip_of(&[
                ("META-INF/container.xml", CONTAINER),
                ("OEBPS/content.opf", opf.as_bytes())
            ])),
            "epub.metadata: the book has more than 10000 chapters"
        );
        // The same chapter listed many times is charged every time it is read.
        let spine: String = (0..60).map(|_| "<itemref idref=\"big\"/>").collect();
        let opf = format!(
            "<package><manifest><item id=\"big\" href=\"big.xhtml\"/></manifest><spine>{spine}</spine></package>"
        );
        let big = format!("<html><body><p>x{}</p></body></html>", " ".repeat(2 << 20));
        let err = extract_text(&[bytes(zip_of(&[
            ("META-INF/container.xml", CONTAINER),
            ("OEBPS/content.opf", opf.as_bytes()),
            ("OEBPS/big.xhtml", big.as_bytes()),
        ]))])
        .err()
        .map(HostError::into_message)
        .unwrap_or_default();
        assert_eq!(
            err,
            "epub.extractText: the archive inflates past the 104857600 byte limit"
        );
    }

    #[test]
    fn mutated_epubs_never_panic() {
        let real = sample(false);
        for m in mutants(&real, 0x0bad_cafe, 200) {
            let r = std::panic::catch_unwind(|| {
                let _ = metadata(&[bytes(m.clone())]);
                let _ = extract_chapters(&[bytes(m.clone())]);
            });
            assert!(r.is_ok(), "a mutated EPUB panicked the reader");
        }
        // Tag stripping is linear and total on any text.
        for junk in [
            "<", "<<<>>>", "<script>", "&", "<p>a<", "<style", "</script",
        ] {
            let _ = stripped_text(junk);
        }
    }
}
